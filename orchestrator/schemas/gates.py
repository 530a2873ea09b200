"""Gate, run and verdict output models (``*Public``).

Every env mapping they carry is masked (:func:`orchestrator.domain.secrets.mask_env`):
values of secret-looking names never leave the service, whoever reads."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ConfigDict, model_validator

from orchestrator.domain.api_model import PublicModel
from orchestrator.domain.secrets import mask_env
from orchestrator.schemas.semantics import SemanticVerdictPublic

__all__ = ["GateProgressPublic", "GatePublic", "GatesPublic", "RunProgressPublic", "RunPublic",
           "VerdictPublic"]


class RunPublic(PublicModel):
    """One run of a gate."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    gate_id: int | None
    """Id of the gate this belongs to."""
    allocation_id: int | None
    """Id of the allocation (one scheduler job) the runs ran on."""
    role: str | None
    """``A`` or ``B`` (control) or ``X`` (candidate)."""
    order: int
    """Position in the run pattern, from 0."""
    status: str
    """Lifecycle state (``queued``, ``submitted``, ``running``, ``succeeded``, ``failed``,
    ``cancelled``; runs also ``pending``, ``skipped``)."""
    source_ref: str | None = None
    """Git ref the run's source was resolved from."""
    source_sha: str | None = None
    """Commit the run's source was built from."""
    source_dirty: bool = False
    """The source tree had uncommitted changes."""
    env: dict[str, Any] = {}
    """Environment overrides of the run (secret-looking values masked)."""
    command: list[Any] = []
    """Command line the run executed (argv)."""
    exit_code: int | None = None
    """Exit status of the run's process; None while running."""
    error: str | None = None
    """Why it failed; None on success."""
    slowest_rank_step_s: list[float] = []
    """Slowest-rank time of each measured step, seconds."""
    num_warmup_steps: int | None = None
    """Warmup steps (excluded from the measurement)."""
    num_measured_steps: int | None = None
    """Measured steps."""
    median_step_s: float | None = None
    """Median slowest-rank step time of the measured steps, seconds."""
    mfu_pct: float | None = None
    """Model FLOPs utilization, percent of the GPUs' peak."""
    samples_per_s: float | None = None
    """Training throughput, samples per second."""
    peak_allocated_bytes: int | None = None
    """Peak memory allocated by tensors on one GPU, bytes."""
    peak_reserved_bytes: int | None = None
    """Peak memory reserved by the caching allocator on one GPU, bytes."""
    world_size: int | None = None
    """Number of ranks (GPUs or CPU processes)."""
    local_batch_size: int | None = None
    """Samples per rank per micro-batch."""
    grad_accum_steps: int | None = None
    """Micro-batches per optimizer step."""
    versions: dict[str, Any] = {}
    """Library and driver versions the run reported."""
    clocks: dict[str, Any] = {}
    """GPU clock and power readings of the run."""
    started_at: dt.datetime | None = None
    """When it started (UTC)."""
    ended_at: dt.datetime | None = None
    """When it ended (UTC)."""

    @model_validator(mode="after")
    def _mask(self) -> RunPublic:
        self.env = mask_env(self.env)
        return self


def _mask_spec(spec: dict[str, Any]) -> dict[str, Any]:
    if isinstance(spec.get("env"), dict):
        return {**spec, "env": mask_env(spec["env"])}
    return spec


class VerdictPublic(PublicModel):
    """A timing verdict with every number the policy computed."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    policy: str
    """Verdict policy: ``sequential``, ``drift`` or ``ratio-ci`` (DESIGN.md section 3)."""
    policy_version: str
    """Version of the policy's rule that produced this verdict."""
    params: dict[str, Any]
    """Policy parameters used."""
    verdict: str
    """Timing verdict: ``accept``, ``reject``, ``neutral``, ``inconclusive`` (re-gates: ``pass``,
    ``regression``, ``improvement``)."""
    numbers: dict[str, Any]
    """Every number of the verdict: control midpoint (s), drift (%), delta (ms and %), interval,
    thresholds."""
    is_primary: bool
    """This is the gate's own policy (the others are shown side by side)."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""


def _planned(params: dict[str, Any], seed: int) -> str | None:
    from orchestrator.verdict import get_policy
    from orchestrator.verdict.sequential import planned_pattern

    try:
        return " ".join(planned_pattern(get_policy("sequential", **params), seed))
    except ValueError:
        return None


class GatePublic(PublicModel):
    """A gate with its runs and verdicts."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    kind: str
    """``candidate`` (a change under test), ``regate`` (nightly re-gate) or ``bisect`` (a bisection
    step)."""
    title: str
    """Free-text title."""
    family: str | None
    """Family name grouping related gates (history and stopping points)."""
    tags: list[str]
    """Free-form labels."""
    status: str
    """Lifecycle state (``queued``, ``submitted``, ``running``, ``succeeded``, ``failed``,
    ``cancelled``; runs also ``pending``, ``skipped``)."""
    status_reason: str | None
    """Why the state was reached (failures and cancellations)."""
    control_spec: dict[str, Any]
    """The control side as requested (source, env)."""
    candidate_spec: dict[str, Any]
    """The candidate side as requested (source, env)."""
    workload: dict[str, Any]
    """What each run executes: a bundled recipe or an external command."""
    recipe_name: str | None
    """Name of the bundled trainer recipe; None for an external command."""
    recipe: dict[str, Any]
    """The resolved recipe (trainer settings)."""
    topology_request: dict[str, Any]
    """Topology requested from the scheduler (nodes, GPUs, partition)."""
    run_pattern: str
    """Order of runs on the allocation, e.g. ``A X B``."""
    num_warmup_steps: int
    """Warmup steps (excluded from the measurement)."""
    num_measured_steps: int
    """Measured steps."""
    policy: str
    """Verdict policy: ``sequential``, ``drift`` or ``ratio-ci`` (DESIGN.md section 3)."""
    policy_params: dict[str, Any]
    """Parameters of the primary policy (empty: the DESIGN defaults)."""
    design_seed: int | None = None
    """Seed of the randomised run order of a sequential gate (its planned pattern is
    reproducible from it: ``orchestrator.verdict.design``); None: the pattern runs as given."""
    planned_pattern: str | None = None
    """The sequential gate's planned pattern at its run budget, from ``design_seed``, e.g.
    ``A A X B A X X B X A A X X A`` (runs measured again after an outlier come on top)."""
    options: dict[str, Any] = {}
    """Gate options: health gate, run timeout, log cap, extensions."""
    executor: str
    """Where the gate runs: ``local``, ``slurm`` or ``debug``."""
    job_ref: str | None
    """Scheduler job id (Slurm) or controller pid (local)."""
    allocation_id: int | None
    """Id of the allocation (one scheduler job) the runs ran on."""
    parent_gate_id: int | None
    """Gate this one was derived from (a rerun or a bisection step)."""
    repository_id: int | None
    """Id of the tracked repository."""
    idempotency_key: str | None
    """Idempotency-Key the gate was submitted with."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    submitted_at: dt.datetime | None
    """When its scheduler job was submitted (UTC)."""
    started_at: dt.datetime | None
    """When it started (UTC)."""
    ended_at: dt.datetime | None
    """When it ended (UTC)."""
    runs: list[RunPublic] = []
    """The runs, in pattern order."""
    verdicts: list[VerdictPublic] = []
    """Verdicts of every policy (one primary)."""
    semantic_verdicts: list[SemanticVerdictPublic] = []
    """Semantic comparisons of the gate, oldest first (the last one counts; issue 19)."""

    @model_validator(mode="after")
    def _mask(self) -> GatePublic:
        self.control_spec = _mask_spec(self.control_spec)
        self.candidate_spec = _mask_spec(self.candidate_spec)
        if self.design_seed is not None and self.planned_pattern is None \
                and self.policy == "sequential":
            self.planned_pattern = _planned(self.policy_params, self.design_seed)
        return self


class GatesPublic(PublicModel):
    """A page of gates."""

    data: list[GatePublic]
    """The gates."""
    count: int
    """Number of items matching (all pages)."""


class RunProgressPublic(PublicModel):
    """How far one run of a gate has got."""

    order: int
    """Position in the run pattern, from 0."""
    role: str | None
    """``A`` or ``B`` (control) or ``X`` (candidate)."""
    status: str
    """Lifecycle state (``queued``, ``submitted``, ``running``, ``succeeded``, ``failed``,
    ``cancelled``; runs also ``pending``, ``skipped``)."""
    num_steps: int
    """Step records stored so far (warmup included)."""
    median_step_s: float | None = None
    """Median slowest-rank step time so far, seconds."""


class GateProgressPublic(PublicModel):
    """A gate's status and per-run step counts (for live progress)."""

    id: int
    """Ledger id (primary key)."""
    status: str
    """Lifecycle state (``queued``, ``submitted``, ``running``, ``succeeded``, ``failed``,
    ``cancelled``; runs also ``pending``, ``skipped``)."""
    status_reason: str | None
    """Why the state was reached (failures and cancellations)."""
    num_steps_per_run: int
    """Warmup plus measured steps each run is asked for."""
    runs: list[RunProgressPublic]
    """Progress of each run."""
