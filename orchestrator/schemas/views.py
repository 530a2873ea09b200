"""Read-side and small write models of the API, pages and CLI (``*Public``/``*Create``)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from orchestrator.domain.api_model import ApiModel, PublicModel
from orchestrator.domain.secrets import mask_override
from orchestrator.schemas.gates import GatePublic
from orchestrator.schemas.runs import (
    AllocationPublic,
    ArtifactPublic,
    HealthCheckPublic,
    RunDetailPublic,
    RunStepPublic,
)
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


class TokenPublic(PublicModel):
    """An API token as listed (never the secret)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    name: str
    """Who or what uses the token."""
    scopes: list[str] = []
    """``read``, ``submit``, ``decide``, ``admin``."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    revoked_at: dt.datetime | None = None
    """When it was revoked (UTC); None while active."""


_FILTER_VALUES = {
    "status": ("queued", "submitted", "running", "succeeded", "failed", "cancelled"),
    "verdict": ("accept", "neutral", "reject", "inconclusive", "failed", "pass", "regression",
                "improvement"),
    "decision": ("accept", "neutral", "reject", "inconclusive", "failed", "pass", "regression",
                 "improvement", "rerun", "reject (semantics)", "not comparable"),
    "kind": ("candidate", "regate", "bisect"),
}


class GateFilters(ApiModel):
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


class SideSummary(PublicModel):
    """One side of a gate as the ledger shows it."""

    sha: str | None = None
    """Full source SHA (when resolved)."""
    sha_short: str | None = None
    """First 10 hex digits of the SHA."""
    ref: str | None = None
    """Git ref of the side (None: the workload as given)."""
    dirty: bool = False
    """The side's tree had uncommitted changes."""
    overrides: list[str] = []
    """Environment (``NAME=value``, secret values masked) and recipe (``section.key=value``)
    overrides."""

    @model_validator(mode="after")
    def _mask(self) -> SideSummary:
        self.overrides = [mask_override(o) for o in self.overrides]
        return self


class GateSummaryPublic(PublicModel):
    """One ledger row: identity, sides, topology, numbers, verdict and decision."""

    id: int
    """Ledger id (primary key)."""
    title: str
    """Free-text title."""
    family: str | None
    """Family name grouping related gates (history and stopping points)."""
    tags: list[str]
    """Free-form labels."""
    kind: str
    """``candidate``, ``regate`` or ``bisect``."""
    status: str
    """Lifecycle state (``queued``, ``submitted``, ``running``, ``succeeded``, ``failed``,
    ``cancelled``; runs also ``pending``, ``skipped``)."""
    status_reason: str | None = None
    """Why the state was reached (failures and cancellations)."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    control: SideSummary
    """The control side (A and B runs)."""
    candidate: SideSummary
    """The candidate side (X runs)."""
    run_pattern: str
    """Order of runs on the allocation, e.g. ``A X B``."""
    topology: str | None
    """Allocation topology, or the requested shape (``requested 1x8``) before allocation."""
    recipe: str
    """Bundled recipe name, or the external command's program name."""
    allocation_id: int | None
    """Id of the allocation (one scheduler job) the runs ran on."""
    scheduler_job_id: str | None = None
    """Scheduler job id of the allocation."""
    health_verdict: str | None = None
    """Health gate verdict of the allocation: ``healthy``, ``degraded`` or ``failed``."""
    midpoint_s: float | None = None
    """Control midpoint, seconds."""
    candidate_s: float | None = None
    """Candidate run median, seconds."""
    delta_ms: float | None = None
    """Candidate minus control midpoint, milliseconds per step."""
    delta_pct: float | None = None
    """Candidate change versus the control midpoint, percent (positive: slower)."""
    drift_pct: float | None = None
    """Control drift between A and B, percent of the midpoint."""
    mfu_points: float | None = None
    """Candidate MFU minus control MFU, percentage points."""
    verdict: str | None = None
    """Primary timing verdict."""
    policy: str | None = None
    """Primary verdict policy of the gate."""
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


class GateSummariesPublic(PublicModel):
    """A page of ledger rows."""

    data: list[GateSummaryPublic]
    """Gates of this page, newest first."""
    count: int
    """Number of items matching (all pages)."""


class DecisionPublic(PublicModel):
    """One recorded decision (append-only history)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    gate_id: int
    """Id of the gate this belongs to."""
    decided_by: str
    """The token's name (API) or the OS user (embedded CLI) that recorded it."""
    decision: str
    """The human decision."""
    reason: str
    """Why (required when the decision differs from the timing verdict)."""
    note: str = ""
    """Any other text."""
    token_id: int | None = None
    """The API token used, ``None`` for the embedded CLI."""
    rerun_gate_id: int | None = None
    """The gate a ``rerun`` decision queued (same request, fresh allocation)."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""


class DecisionCreate(ApiModel):
    """Body of ``POST /gates/{id}/decisions``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"decision": "accept", "reason": "",
                                                                  "note": "merged in #123"}]})

    decision: Literal[
        "accept", "reject", "neutral", "inconclusive", "pass", "regression", "improvement", "rerun"
    ]
    """``accept``, ``reject``, ``neutral``, ``inconclusive``; re-gates ``pass``, ``regression``,
    ``improvement``; ``rerun`` asks for a new gate."""
    reason: str = Field("", max_length=4000, pattern=_NO_NUL)
    """Why; required when the decision differs from the timing verdict."""
    note: str = Field("", max_length=1000, pattern=_NO_NUL)
    """Free text kept with the decision (e.g. on whose behalf it was recorded)."""
    decided_by: str | None = Field(None, max_length=255, pattern=_NO_NUL)
    """Not settable: decisions are recorded under the token's name. Sending it is refused
    (422) unless it equals that name; put anything else in ``note``."""


class CancelRequest(ApiModel):
    """Optional body of ``POST /gates/{id}/cancel``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"reason": "superseded by gate 12"}]})

    reason: str = Field("cancelled by user", max_length=1000, pattern=_NO_NUL)
    """Why the gate is cancelled (stored on the gate)."""


class GateViewPublic(GatePublic):
    """One gate (``POST /gates``, ``GET /gates/{id}``, ``POST /gates/{id}/cancel``): the
    gate's own fields at the top level, its runs in detail, and what the gate page shows.

    Until 0.1 ``GET /gates/{id}`` nested the gate under ``gate``; that key stays (same
    content as the top level) for old clients and will be removed (docs/api.md)."""

    runs: list[RunDetailPublic] = []
    """Runs in pattern order, with their measured numbers and files (per-step records are
    on ``GET /runs/{id}``)."""
    summary: GateSummaryPublic
    """The gate's ledger row (numbers, verdict, decision)."""
    allocation: AllocationPublic | None
    """The allocation the runs ran on; None before it started."""
    decisions: list[DecisionPublic]
    """Decision history, oldest first (the newest counts)."""
    artifacts: list[ArtifactPublic]
    """Every stored file of the gate."""
    family_history: list[GateSummaryPublic]
    """Earlier gates of the same family (or title when no family), newest first."""
    semantic_verdict: SemanticVerdictPublic | None = None
    """The newest semantic comparison of the gate, with its evidence."""
    gate: GatePublic = Field(json_schema_extra={"deprecated": True})
    """Deprecated: the gate again (runs without detail), as ``GET /gates/{id}`` answered
    before the shapes were unified; read the top-level fields instead."""


class StoppingPointPublic(PublicModel):
    """The best baseline-eligible accepted gate of one topology and recipe."""

    topology: str
    """Topology the stopping point is for."""
    recipe: str
    """Recipe the stopping point is for."""
    candidate_s: float
    """Candidate run median of the best gate, seconds."""
    num_accepted: int
    """Baseline-eligible accepted gates of this topology and recipe."""
    gate: GateSummaryPublic
    """The last accepted gate there."""


class StoppingPointsPublic(PublicModel):
    """The stopping-point table."""

    data: list[StoppingPointPublic]
    """One per (topology, recipe)."""


class DecisionGroupPublic(PublicModel):
    """Gates of one tag or family with their effective decisions (decision index)."""

    group_kind: Literal["family", "tag"]
    """Grouped by ``family`` or ``tag``."""
    name: str
    """Family or tag name."""
    num_accepted: int
    """Gates accepted in this group."""
    num_rejected: int
    """Gates rejected in this group."""
    gates: list[GateSummaryPublic]
    """The gates of this group."""


Median = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]


class VerdictPreviewCreate(ApiModel):
    """Body of ``POST /verdicts/preview``: run medians in, verdict out (no database)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "pattern": "A X B", "medians_s": [1.000, 0.950, 1.002], "policy": "drift"}]})

    pattern: str = Field("A X B", max_length=64)
    """Roles in run order, e.g. ``A X B`` or ``A X B X A``."""
    medians_s: list[Median] = Field(min_length=3, max_length=21)
    """One run median per role, seconds."""
    kind: Literal["candidate", "regate"] = "candidate"
    """``candidate`` (accept/reject) or ``regate`` (pass/regression/improvement)."""
    policy: str = Field("drift", max_length=32)
    """Policy to judge with (DESIGN.md section 3)."""
    policy_params: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = {}
    """Policy thresholds, e.g. ``{"max_drift_pct": 2.0}``."""
    mfu_numerator_pct_s: Annotated[float, Field(gt=0, le=1e12, allow_inf_nan=False)] | None = None
    """MFU numerator of the runs, percent-seconds (None: no MFU comparison)."""
    control_local_batch_size: int = Field(1, ge=1, le=1_000_000)
    """Control's samples per rank per micro-batch."""
    control_grad_accum_steps: int = Field(1, ge=1, le=1_000_000)
    """Control's micro-batches per optimizer step."""
    candidate_local_batch_size: int = Field(1, ge=1, le=1_000_000)
    """Candidate's samples per rank per micro-batch."""
    candidate_grad_accum_steps: int = Field(1, ge=1, le=1_000_000)
    """Candidate's micro-batches per optimizer step."""
