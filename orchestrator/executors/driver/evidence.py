"""Evidence a run cannot touch: what the driver checks of a run's files and its own.

A run's numbers come only from the output the driver captured and hashed. A result file a
run writes into its own folder is input to check against its log (:func:`check_own_results`);
every result file the driver wrote is sealed with its SHA-256 and checked again after each
later run (:class:`ResultSeals`). :class:`DiskReserve` holds back space for the driver's last
writes when the data disk fills.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["DiskReserve", "ResultSeals", "check_own_results"]

_OWN_RESULT_KEYS = ("median_step_s", "log_median_step_s", "mfu_pct", "tokens_per_s", "world_size")
"""Numbers a run's own result file may state; each must equal the driver's from the log."""
_OWN_RESULT_REL = 1e-6
"""Relative difference above which a run's own number disagrees with its log's (the
record contract prints floats with full precision; this only absorbs rounding)."""

_DISK_RESERVE_BYTES = 1 << 20
"""Space the driver holds back for its last writes on a full disk (1 MiB)."""


def check_own_results(files: list[Path], fields: dict[str, Any], log_name: str) -> str | None:
    """Compare the result files a run wrote itself with what its log says.

    A run's own files are input to check, never evidence: a file that is not JSON, or
    states a number of :data:`_OWN_RESULT_KEYS` other than the one measured from the log,
    fails the run.

    Args:
        files: Candidate own-result files (``GatePaths.run_own_results``); missing ones
            are skipped.
        fields: The run's measured fields, from its log.
        log_name: The log as the reason names it (``runs/01-X.log``).

    Returns:
        The reason naming the file, its value and the log's value, or None.
    """
    for path in files:
        try:
            if not path.is_file() or path.is_symlink():
                continue
            claimed = json.loads(path.read_bytes()[: 1 << 20])
        except (OSError, ValueError) as exc:
            return f"its own result file {path.parent.name}/{path.name} is unreadable ({exc})"
        if not isinstance(claimed, dict):
            continue
        for key in _OWN_RESULT_KEYS:
            mine, logged = claimed.get(key), fields.get("median_step_s" if key == "log_median_step_s" else key)
            if mine is None or not isinstance(mine, (int, float)) or isinstance(mine, bool):
                continue
            if logged is None or not math.isclose(float(mine), float(logged), rel_tol=_OWN_RESULT_REL):
                return (f"its own result file {path.parent.parent.name}/{path.parent.name}/{path.name} "
                        f"says {key}={mine!r} but its log {log_name} says {logged!r}")
    return None


class ResultSeals:
    """SHA-256 seals of the result files the driver wrote.

    Args:
        root: The gate folder (reasons name files relative to it).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.digests: dict[Path, str] = {}

    def seal(self, path: Path) -> None:
        """Remember the digest of ``path`` as the driver just wrote it."""
        self.digests[path] = hashlib.sha256(path.read_bytes()).hexdigest()

    def changed(self, after: str) -> str | None:
        """The reason a sealed file no longer matches (changed or missing), or None.

        Args:
            after: What just ended, for the reason ("run 3 (B)").
        """
        for path, digest in self.digests.items():
            try:
                now = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                now = "missing"
            if now != digest:
                return (f"{path.relative_to(self.root)} changed after the driver wrote it (found "
                        f"while {after} ended): a run wrote into the driver's files")
        return None


class DiskReserve:
    """A preallocated file the driver frees when a write fails for lack of space, so the
    result and ``status.json`` that say so still fit.

    Args:
        path: Where the reserve lives (``GatePaths.disk_reserve``); nothing is reserved
            when the file cannot be allocated (the driver goes on without it).
    """

    def __init__(self, path: Path, size_bytes: int = _DISK_RESERVE_BYTES) -> None:
        self.path = path
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, size_bytes)
            finally:
                os.close(fd)
        except OSError:
            path.unlink(missing_ok=True)

    def release(self) -> None:
        """Free the reserve (idempotent)."""
        self.path.unlink(missing_ok=True)
