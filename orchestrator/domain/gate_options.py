"""How a gate is run apart from its workload and policy: the health gate and run options.

Re-exported by ``orchestrator.domain.gate_spec`` (``GateCreate.options()`` builds them).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from orchestrator.domain.api_model import ApiModel

__all__ = ["GateOptions", "HealthSpec"]


class HealthSpec(ApiModel):
    """The health gate run before (and optionally between) runs."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Run the health gate (GPU inventory, clocks, fabric, collectives)."""
    criteria: str | None = None
    """Criteria name or TOML path; ``None`` selects by the detected topology."""
    between_runs: bool = False
    """Re-run the fast checks (clocks, scalar all-reduce) before every run."""
    timeout_s: float = Field(300.0, gt=0)
    """Deadline of the health gate, seconds."""


class GateOptions(ApiModel):
    """How a gate is run, apart from the workload and the verdict policy (``Gate.options``)."""

    model_config = ConfigDict(extra="forbid")

    health: HealthSpec = Field(default_factory=HealthSpec)
    """Health gate before the runs."""
    run_timeout_s: float = Field(1800.0, gt=0)
    """Deadline of each run, seconds; a run past it is killed and fails the gate."""
    max_log_bytes: int = Field(2 * 1024**3, ge=1024**2, le=64 * 1024**3)
    """Output a run may write, bytes (default 2 GiB); a run past it is killed and fails."""
    max_extend: int = Field(0, ge=0, le=5)
    """While the verdict is ``inconclusive``, append ``X B`` up to this many times."""
    fork_server: bool = True
    """Local bundled-trainer runs are forked from a process that imported torch once per
    allocation (each run is still a fresh set of processes); False: torchrun per run."""
    warmup_mode: Literal["fixed", "steady"] = "fixed"
    """``fixed``: every run warms up exactly ``warmup_steps``; ``steady``: warmup ends when
    the last 5 slowest-rank step times agree within 1% (at least ``warmup_steps``, at most
    ``max_warmup_steps``). Every run of the gate uses the same rule."""
    max_warmup_steps: int = Field(50, ge=1, le=100000)
    """Most warmup steps under ``steady`` (the run measures from there even if unsettled)."""
    measured_seconds: float | None = Field(None, gt=0, le=86400)
    """Measured window in seconds of step time, sized once per run at the steady-state
    step time (at least ``measured_steps`` steps); None: exactly ``measured_steps``."""
    declare_changes: list[Literal["batch"]] = Field(default_factory=list, max_length=1)
    """Semantic changes the candidate makes on purpose (``batch``: another global batch);
    the semantic gate then does not call the gate ``not comparable`` and the timing
    verdict compares time per sample."""
    auto_window: bool = False
    """The allocation chooses the measured window after its conditioning run, the one
    that minimises expected GPU-seconds per decision (``domain.cost_model``)."""
    max_window_s: float = Field(60.0, gt=0, le=3600)
    """Longest window the cost model may choose, seconds of steps."""
    semantic_floor_prefix_steps: int | None = Field(None, ge=1, le=100)
    """Compared steps at the start that share one semantic floor
    (``SemanticPolicy.floor_prefix_steps``; the request's, else the recipe's ``[measure]``);
    None: the policy default."""
