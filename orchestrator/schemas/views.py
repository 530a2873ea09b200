"""Read-side and small write models of the API, pages and CLI (``*Public``/``*Create``)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.domain.secrets import mask_env, mask_override
from orchestrator.schemas.gates import GatePublic, RunPublic
from orchestrator.schemas.semantics import SemanticVerdictPublic
from orchestrator.schemas.verdicts import VerdictBriefPublic

__all__ = [
    "AllocationPublic",
    "ArtifactPublic",
    "CancelRequest",
    "DecisionCreate",
    "DecisionGroupPublic",
    "DecisionPublic",
    "GateFilters",
    "GateSummariesPublic",
    "GateSummaryPublic",
    "GateViewPublic",
    "HealthCheckPublic",
    "RunDetailPublic",
    "RunStepPublic",
    "SideSummary",
    "StoppingPointPublic",
    "StoppingPointsPublic",
    "TokenPublic",
    "VerdictPreviewCreate",
]

DECISION_VALUES = (
    "accept", "reject", "neutral", "inconclusive", "pass", "regression", "improvement", "rerun"
)
_NO_NUL = r"^[^\x00]*$"
FilterText = Annotated[str | None, Field(default=None, max_length=255, pattern=_NO_NUL)]


class TokenPublic(BaseModel):
    """An API token as listed (never the secret)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    scopes: list[str] = []
    """``read``, ``submit``, ``decide``, ``admin``."""
    created_at: dt.datetime
    revoked_at: dt.datetime | None = None


_FILTER_VALUES = {
    "status": ("queued", "submitted", "running", "succeeded", "failed", "cancelled"),
    "verdict": ("accept", "neutral", "reject", "inconclusive", "failed", "pass", "regression",
                "improvement"),
    "decision": ("accept", "neutral", "reject", "inconclusive", "failed", "pass", "regression",
                 "improvement", "rerun", "reject (semantics)", "not comparable"),
    "kind": ("candidate", "regate", "bisect"),
}


class GateFilters(BaseModel):
    """Filters of ``GET /gates`` and the ledger page. Empty strings mean "no filter"."""

    model_config = ConfigDict(extra="forbid")

    status: FilterText = None
    """Gate lifecycle state (queued, submitted, running, succeeded, failed, cancelled)."""
    verdict: FilterText = None
    """Primary timing verdict (accept, neutral, reject, inconclusive, failed, pass, ...)."""
    decision: FilterText = None
    """Effective decision: the newest recorded decision, else the timing verdict combined
    with the semantic verdict (``reject (semantics)``, ``not comparable``)."""
    kind: FilterText = None
    """candidate, regate or bisect."""
    tag: FilterText = None
    """Gates carrying this tag."""
    family: FilterText = None
    """Gates of this family."""
    topology: FilterText = None
    """Allocation topology string, e.g. ``2x4 GB200 MNNVL``."""
    recipe: FilterText = None
    """Bundled trainer recipe name."""
    repository: FilterText = None
    """Tracked repository URL or the candidate's source repository."""
    q: FilterText = None
    """Case-insensitive search in title and family."""
    created_after: dt.datetime | None = None
    """Only gates created at or after this time (ISO 8601)."""
    created_before: dt.datetime | None = None
    """Only gates created before this time (ISO 8601)."""
    baseline_eligible: bool | None = None
    """Only gates that are (true) or are not (false) baseline-eligible."""
    skip: int = Field(0, ge=0, le=1_000_000_000)
    """Rows to skip (pagination)."""
    limit: int = Field(50, ge=1, le=500)
    """Rows to return (pagination)."""

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("status", "verdict", "decision", "kind")
    @classmethod
    def _known_value(cls, value: str | None, info) -> str | None:
        allowed = _FILTER_VALUES[info.field_name]
        if value is not None and value not in allowed:
            raise ValueError(f"unknown {info.field_name} {value!r}; one of: {', '.join(allowed)}")
        return value

    @field_validator("created_after", "created_before")
    @classmethod
    def _aware(cls, value: dt.datetime | None) -> dt.datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value

    def query_string_without_paging(self) -> str:
        """Return the active filters as a URL query string (no skip/limit)."""
        from urllib.parse import urlencode

        items = self.model_dump(exclude={"skip", "limit"}, exclude_none=True, mode="json")
        return urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in items.items()})


class SideSummary(BaseModel):
    """One side of a gate as the ledger shows it."""

    sha: str | None = None
    """Full source SHA (when resolved)."""
    sha_short: str | None = None
    """First 10 hex digits of the SHA."""
    ref: str | None = None
    dirty: bool = False
    overrides: list[str] = []
    """Environment (``NAME=value``, secret values masked) and recipe (``section.key=value``)
    overrides."""

    @model_validator(mode="after")
    def _mask(self) -> SideSummary:
        self.overrides = [mask_override(o) for o in self.overrides]
        return self


class GateSummaryPublic(BaseModel):
    """One ledger row: identity, sides, topology, numbers, verdict and decision."""

    id: int
    title: str
    family: str | None
    tags: list[str]
    kind: str
    status: str
    status_reason: str | None = None
    created_at: dt.datetime
    control: SideSummary
    candidate: SideSummary
    run_pattern: str
    topology: str | None
    """Allocation topology, or the requested shape (``requested 1x8``) before allocation."""
    recipe: str
    """Bundled recipe name, or the external command's program name."""
    allocation_id: int | None
    scheduler_job_id: str | None = None
    health_verdict: str | None = None
    midpoint_s: float | None = None
    """Control midpoint, seconds."""
    candidate_s: float | None = None
    """Candidate run median, seconds."""
    delta_ms: float | None = None
    delta_pct: float | None = None
    drift_pct: float | None = None
    mfu_points: float | None = None
    verdict: str | None = None
    """Primary timing verdict."""
    policy: str | None = None
    semantics: str | None = None
    """Semantic status (equal, within tolerance, changed, not comparable, declared change,
    not checked), or None before the gate was judged."""
    decision: str | None = None
    """Effective decision: newest recorded decision, else the timing verdict combined with
    the semantic verdict (``reject (semantics)``, ``not comparable``)."""
    decision_recorded: bool = False
    """True when a person recorded the decision (not defaulted from the verdict)."""
    baseline_eligible: bool = False
    """Succeeded on an allocation whose health verdict is ``healthy``."""
    verdicts: list[VerdictBriefPublic] = []
    """Every policy's verdict, primary first (the campaign rule ``drift`` among them)."""
    policies_disagree: bool = False
    """True when another policy's verdict differs from the primary one."""


class GateSummariesPublic(BaseModel):
    """A page of ledger rows."""

    data: list[GateSummaryPublic]
    count: int


class HealthCheckPublic(BaseModel):
    """One health-gate check."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    status: str
    host: str | None
    measured: dict[str, Any]
    threshold: dict[str, Any]
    message: str | None
    created_at: dt.datetime


class AllocationPublic(BaseModel):
    """An allocation with its health report."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    scheduler_job_id: str | None
    executor: str
    cluster: str | None
    hostnames: list[Any]
    num_nodes: int
    gpu_model: str | None
    gpus_per_node: int | None
    num_gpus: int | None
    topology: str | None
    clock_bin: str | None
    max_sm_clock_mhz: float | None
    power_limit_w: float | None
    health_verdict: str
    driver_version: str | None
    cuda_version: str | None
    nccl_version: str | None
    torch_version: str | None
    criteria: dict[str, Any]
    created_at: dt.datetime
    baseline_eligible: bool = False
    """Health verdict ``healthy`` (every check passed, healthy clock bin)."""
    health_checks: list[HealthCheckPublic] = []


class DecisionPublic(BaseModel):
    """One recorded decision (append-only history)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    gate_id: int
    decided_by: str
    """The token's name (API) or the OS user (embedded CLI) that recorded it."""
    decision: str
    reason: str
    note: str = ""
    token_id: int | None = None
    """The API token used, ``None`` for the embedded CLI."""
    rerun_gate_id: int | None = None
    """The gate a ``rerun`` decision queued (same request, fresh allocation)."""
    created_at: dt.datetime


class DecisionCreate(BaseModel):
    """Body of ``POST /gates/{id}/decisions``."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal[
        "accept", "reject", "neutral", "inconclusive", "pass", "regression", "improvement", "rerun"
    ]
    reason: str = Field("", max_length=4000, pattern=_NO_NUL)
    """Why; required when the decision differs from the timing verdict."""
    note: str = Field("", max_length=1000, pattern=_NO_NUL)
    """Free text kept with the decision (e.g. on whose behalf it was recorded)."""
    decided_by: str | None = Field(None, max_length=255, pattern=_NO_NUL)
    """Not settable: decisions are recorded under the token's name. Sending it is refused
    (422) unless it equals that name; put anything else in ``note``."""


class CancelRequest(BaseModel):
    """Optional body of ``POST /gates/{id}/cancel``."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field("cancelled by user", max_length=1000, pattern=_NO_NUL)


class ArtifactPublic(BaseModel):
    """A kept raw file and its SHA-256."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    run_id: int | None
    gate_id: int | None
    allocation_id: int | None
    kind: str
    size_bytes: int
    sha256: str
    created_at: dt.datetime
    log_url: str | None = None
    """Where to download it (``/runs/{run_id}/log?artifact_id=...``), when it is a run's."""


class RunStepPublic(BaseModel):
    """One optimizer step as the run reported it."""

    model_config = ConfigDict(from_attributes=True)

    step: int
    slowest_rank_step_s: float | None
    """Slowest rank's seconds; ``None`` when the run printed only its own rank's time
    (harness ``BF16_STEP``: rank 0's ``step_time_sec``, in ``rank_step_s``)."""
    rank_step_s: float | None
    loss: float | None
    grad_norm: float | None
    phase: str | None


class RunDetailPublic(RunPublic):
    """A run with provenance, per-step records and artifacts."""

    mfu_numerator_pct_s: float | None = None
    flops_per_sample: int | None = None
    peak_flops_per_gpu: float | None = None
    provenance: dict[str, Any] = {}
    result_extra: dict[str, Any] = {}
    semantics: dict[str, Any] | None = None
    """What the run trained (batch, loss/grad-norm series, dtype coverage, probe)."""
    artifacts: list[ArtifactPublic] = []
    steps: list[RunStepPublic] = []
    """One page of the per-step records (``GET /runs/{id}``; empty in gate views)."""
    num_steps: int | None = None
    """Step records stored for the run (all pages); ``None`` in gate views."""
    num_series_steps: int = 0
    """Entries of the whole per-step series (``slowest_rank_step_s`` may hold one page)."""
    steps_offset: int = 0
    """First step record / series entry of this page."""
    steps_limit: int | None = None
    """Page size asked for; ``None`` in gate views (the whole series is included)."""

    @model_validator(mode="after")
    def _mask_provenance(self) -> RunDetailPublic:
        if isinstance(self.provenance.get("env"), dict):
            self.provenance = {**self.provenance, "env": mask_env(self.provenance["env"])}
        return self


class GateViewPublic(BaseModel):
    """Everything the gate page shows (``GET /gates/{id}``)."""

    gate: GatePublic
    summary: GateSummaryPublic
    runs: list[RunDetailPublic]
    allocation: AllocationPublic | None
    decisions: list[DecisionPublic]
    artifacts: list[ArtifactPublic]
    family_history: list[GateSummaryPublic]
    """Earlier gates of the same family (or title when no family), newest first."""
    semantic_verdict: SemanticVerdictPublic | None = None
    """The newest semantic comparison of the gate, with its evidence."""


class StoppingPointPublic(BaseModel):
    """The best baseline-eligible accepted gate of one topology and recipe."""

    topology: str
    recipe: str
    candidate_s: float
    """Candidate run median of the best gate, seconds."""
    num_accepted: int
    """Baseline-eligible accepted gates of this topology and recipe."""
    gate: GateSummaryPublic


class StoppingPointsPublic(BaseModel):
    """The stopping-point table."""

    data: list[StoppingPointPublic]


class DecisionGroupPublic(BaseModel):
    """Gates of one tag or family with their effective decisions (decision index)."""

    group_kind: Literal["family", "tag"]
    name: str
    num_accepted: int
    num_rejected: int
    gates: list[GateSummaryPublic]


Median = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class VerdictPreviewCreate(BaseModel):
    """Body of ``POST /verdicts/preview``: run medians in, verdict out (no database)."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field("A X B", max_length=64)
    """Roles in run order, e.g. ``A X B`` or ``A X B X A``."""
    medians_s: list[Median] = Field(min_length=3, max_length=21)
    """One run median per role, seconds."""
    kind: Literal["candidate", "regate"] = "candidate"
    policy: str = Field("drift", max_length=32)
    policy_params: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = {}
    """Policy thresholds, e.g. ``{"max_drift_pct": 2.0}``."""
    mfu_numerator_pct_s: Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)] | None = None
    control_local_batch_size: int = Field(1, ge=1, le=1_000_000)
    control_grad_accum_steps: int = Field(1, ge=1, le=1_000_000)
    candidate_local_batch_size: int = Field(1, ge=1, le=1_000_000)
    candidate_grad_accum_steps: int = Field(1, ge=1, le=1_000_000)
