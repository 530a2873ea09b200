"""The gate plan: everything the driver needs, as plain JSON in the gate folder.

The service writes ``plan.json``; the driver (on the allocation) reads it and writes
``status.json``, ``health.log``/``health.json`` and ``runs/NN-R.log``/``runs/NN-R.json``
next to it. Files are written to a temporary name and renamed, so the poller never
reads half a JSON file (submitit's ``temporary_save_path`` idea); logs are appended
line by line and the poller reads only complete lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GatePlan", "read_json", "run_file_stem", "write_json_atomic"]


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> Any | None:
    """Return the JSON in ``path`` or ``None`` when it does not exist yet."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def run_file_stem(order: int, role: str) -> str:
    """File stem of a run's log and result, e.g. ``"00-A"``."""
    return f"{order:02d}-{role}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GatePlan:
    """What the driver runs on one allocation."""

    gate_id: int
    gate_dir: str
    """Absolute folder of this gate (shared between the service and the allocation)."""
    executor: str
    """``local``, ``slurm`` or ``debug``."""
    roles: list[str]
    """Run pattern, e.g. ``["A", "X", "B"]``."""
    sides: dict[str, dict[str, Any]]
    """``control`` / ``candidate`` -> ``{"source": {...}, "env": {...},
    "recipe_overrides": [...]}``."""
    workload: dict[str, Any]
    """``{"recipe": name}`` or ``{"command": argv template}``."""
    nodes: int
    ranks_per_node: int
    gpus_per_node: int
    num_warmup_steps: int
    num_measured_steps: int
    health: dict[str, Any]
    run_timeout_s: float
    max_extend: int
    policy: str
    policy_params: dict[str, Any]
    kind: str
    max_log_bytes: int = 2 * 1024**3
    """Output one step may write, bytes; past it the step is killed and the run fails."""
    python: str = dataclasses.field(default_factory=lambda: sys.executable)
    """Interpreter for trainer, health and driver processes."""
    project_root: str = dataclasses.field(
        default_factory=lambda: str(Path(__file__).resolve().parents[2])
    )

    def save(self) -> Path:
        """Write ``plan.json`` into the gate folder and return its path."""
        path = Path(self.gate_dir) / "plan.json"
        write_json_atomic(path, dataclasses.asdict(self))
        return path

    @classmethod
    def load(cls, path: Path) -> GatePlan:
        """Read a plan written by :meth:`save`."""
        return cls(**json.loads(Path(path).read_text()))
