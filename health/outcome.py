"""Check outcomes and statuses shared by the judge and its rule modules (pure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

PASS, WARN, FAIL, HANG = "PASS", "WARN", "FAIL", "HANG"
_RANK = {PASS: 0, WARN: 1, FAIL: 2, HANG: 3}

@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """One judged check: one ``AXBGATE_HEALTH`` record."""

    check: str
    status: str
    message: str = ""
    measured: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    threshold: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    host: str | None = None
    gpu_index: int | None = None
    duration_s: float | None = None
    stack_dump: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The record-contract object (docs/record-contract.md, ``AXBGATE_HEALTH``).

        Returns:
            ``{"v": 1, "check", "status", ...}`` with empty optional keys left out.
        """
        out: dict[str, Any] = {"v": 1, "check": self.check, "status": self.status}
        for key in ("measured", "threshold"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key))
        for key in ("message", "host", "gpu_index", "duration_s", "stack_dump"):
            value = getattr(self, key)
            if value not in (None, ""):
                out[key] = value
        return out


def worst(statuses: Sequence[str]) -> str:
    """The most severe status (HANG > FAIL > WARN > PASS).

    Args:
        statuses: statuses; empty counts as PASS.

    Returns:
        The worst one.
    """
    return max(statuses, key=_RANK.__getitem__, default=PASS)
