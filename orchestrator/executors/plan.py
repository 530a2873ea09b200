"""The gate plan and the gate folder: everything the driver needs, as plain JSON.

:class:`GatePaths` is the ONE map of a gate's folder (submitit's ``JobPaths`` idea):
the service writes ``plan.json``; the driver (on the allocation) reads it and writes
``status.json``, ``health.log``/``health.json``, and per run ``runs/NN-R.log`` (raw
output), ``runs/NN-R.steps.jsonl`` (step records as they are printed) and
``runs/NN-R.json`` (the run's measured outcome) next to it. ``runs/`` belongs to the
driver (0700, files 0600): a run never writes there. Each run gets its own output folder
``out/NN-R/`` (its ``{out_dir}`` and, without a source checkout, its working directory);
under ``security.run_as_user`` only the running run's folders belong to the run account. Files are written to a
temporary name and renamed, so the poller never reads half a JSON file (submitit's
``temporary_save_path``); the step stream is appended line by line and the poller reads
only complete lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GatePaths", "GatePlan", "read_json", "run_file_stem", "write_json_atomic"]



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


@dataclasses.dataclass(frozen=True)
class GatePaths:
    """Where every file of one gate lives (the only place that spells the layout)."""

    root: Path
    """The gate folder, ``<data_dir>/gates/<gate id, 6 digits>``."""

    @classmethod
    def of(cls, data_dir: Path | str, gate_id: int) -> GatePaths:
        """The folder of gate ``gate_id`` under the service data directory."""
        return cls(Path(data_dir) / "gates" / f"{gate_id:06d}")

    @property
    def plan(self) -> Path:
        """``plan.json``: written by the service, read by the driver."""
        return self.root / "plan.json"

    @property
    def status(self) -> Path:
        """``status.json``: the driver's state, timeline and reason."""
        return self.root / "status.json"

    @property
    def runs_dir(self) -> Path:
        """Folder of the per-run files."""
        return self.root / "runs"

    @property
    def out_root(self) -> Path:
        """Folder of the runs' own output folders (``out/NN-R``)."""
        return self.root / "out"

    def run_out(self, order: int, role: str) -> Path:
        """Run ``order``'s own output folder: its ``{out_dir}``; the only gate folder it
        may write into (with its compile cache and home under ``run_as_user``)."""
        return self.out_root / run_file_stem(order, role)

    def run_home_of(self, order: int, role: str) -> Path:
        """``HOME`` of run ``order`` under ``security.run_as_user`` (one per run, so that
        nothing a run leaves in its home, e.g. ``~/.local``, reaches a later run)."""
        return self.run_home / run_file_stem(order, role)

    def side_compile_cache(self, side: str) -> Path:
        """Compile cache of one side under ``security.run_as_user`` (the candidate never
        writes the controls' compiled kernels)."""
        return self.compile_cache / side

    @property
    def disk_reserve(self) -> Path:
        """Space the driver holds back, freed when a disk is full so that its last
        results and ``status.json`` still fit."""
        return self.root / ".disk-reserve"

    @property
    def submitit_dir(self) -> Path:
        """submitit's job folder (pickles, stdout/stderr of the driver job)."""
        return self.root / "submitit"

    @property
    def compile_cache(self) -> Path:
        """Inductor/Triton cache shared by the runs of one allocation."""
        return self.root / "compile-cache"

    @property
    def run_home(self) -> Path:
        """Parent of the runs' ``HOME`` folders under ``security.run_as_user``."""
        return self.root / "home"

    @property
    def sources_dir(self) -> Path:
        """Worktrees of the source revisions under test."""
        return self.root / "src"

    @property
    def active_pgid(self) -> Path:
        """Process group of the step that is running (reaped if the driver dies)."""
        return self.root / "active-step.pgid"

    @property
    def cancel_sent(self) -> Path:
        """Marker: the scheduler job of a cancelled gate was signalled."""
        return self.root / "cancel-sent"

    @property
    def steps_collected(self) -> Path:
        """Marker: the steps of a cancelled gate's runs were stored after its driver ended."""
        return self.root / "steps-collected"

    @property
    def fork_server_socket(self) -> Path:
        """UNIX socket of the trainer's fork server (local recipe gates)."""
        return self.root / "forkserver.sock"

    @property
    def fork_server_log(self) -> Path:
        """Output of the trainer's fork server."""
        return self.root / "forkserver.log"

    @property
    def driver_error(self) -> Path:
        """Traceback of a driver that broke."""
        return self.root / "driver-error.log"

    def health_log(self, tag: str = "health") -> Path:
        """Raw output of one health gate (``health`` first, ``health-NN`` between runs)."""
        return self.root / f"{tag}.log"

    def health_result(self, tag: str = "health") -> Path:
        """The driver's reading of one health gate (verdict, checks, allocation facts)."""
        return self.root / f"{tag}.json"

    def run_log(self, order: int, role: str) -> Path:
        """Raw output of run ``order``."""
        return self.runs_dir / f"{run_file_stem(order, role)}.log"

    def run_started(self, order: int, role: str) -> Path:
        """Written when run ``order`` starts (command, start time)."""
        return self.runs_dir / f"{run_file_stem(order, role)}.started.json"

    def run_steps(self, order: int, role: str) -> Path:
        """Step records of run ``order`` as JSON lines, appended while it runs."""
        return self.runs_dir / f"{run_file_stem(order, role)}.steps.jsonl"

    def run_result(self, order: int, role: str) -> Path:
        """The measured outcome of run ``order`` (written once, when it ends, by the
        driver from the log it captured and hashed)."""
        return self.runs_dir / f"{run_file_stem(order, role)}.json"

    def run_own_results(self, order: int, role: str) -> list[Path]:
        """Result files run ``order`` may write itself (checked against its log, never
        stored): ``{out_dir}/NN-R.json`` and ``{out_dir}/result.json``."""
        out = self.run_out(order, role)
        return [out / f"{run_file_stem(order, role)}.json", out / "result.json"]


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
    """Primary verdict policy (decides whether to extend the pattern)."""
    policy_params: dict[str, Any]
    """Parameters of that policy only."""
    kind: str
    """``candidate`` or ``regate`` (the verdict table, see ``verdict.verdict_kind``)."""
    design_seed: int | None = None
    """Seed of the sequential policy's randomised run order (``verdict.design``)."""
    auto_window: bool = False
    """Measure the conditioning run with a calibration window, then give the later runs the
    cost model's window (``executors.driver.window``)."""
    max_window_s: float = 60.0
    """Longest window the cost model may choose, seconds."""
    control_history: list[list[float]] = dataclasses.field(default_factory=list)
    """Control-median pairs of earlier gates of the same control identity, seconds; the
    same history the service judges the stored verdict with."""
    fork_server: bool = True
    """Launch local bundled-trainer runs from a fork server that imported torch once."""
    preamble: bool = True
    """Compute the launch preamble per step (``TopologySpec.preamble``)."""
    warmup_mode: str = "fixed"
    """``fixed`` or ``steady`` (domain.gate_spec.GateOptions)."""
    max_warmup_steps: int = 50
    """Most warmup steps under ``steady``."""
    measured_seconds: float | None = None
    """Measured window in seconds, or None for exactly ``num_measured_steps``."""
    declared_changes: list[str] = dataclasses.field(default_factory=list)
    """Semantic changes the gate declared (``batch``: timing is compared per sample)."""
    max_log_bytes: int = 2 * 1024**3
    """Output one step may write, bytes; past it the step is killed and the run fails."""
    run_env: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What a run's environment is built from (``RunEnvPolicy.to_plan()``: allow-list,
    pass-through names, secret patterns, run-as user); empty means the defaults."""
    python: str = dataclasses.field(default_factory=lambda: sys.executable)
    """Interpreter for trainer, health and driver processes."""
    project_root: str = dataclasses.field(
        default_factory=lambda: str(Path(__file__).resolve().parents[2])
    )

    @property
    def paths(self) -> GatePaths:
        """The map of this gate's folder."""
        return GatePaths(Path(self.gate_dir))

    def save(self) -> Path:
        """Write ``plan.json`` into the gate folder and return its path."""
        path = self.paths.plan
        write_json_atomic(path, dataclasses.asdict(self))
        return path

    @classmethod
    def load(cls, path: Path) -> GatePlan:
        """Read a plan written by :meth:`save`."""
        return cls(**json.loads(Path(path).read_text()))
