"""Ledger tables (DESIGN.md sections 1-2). Columns and relationships only.

Units are in column names: ``_s`` seconds, ``_bytes`` bytes, ``_pct`` percent,
``_mhz`` MHz, ``_w`` watts. Lists of per-step times are JSON arrays of floats.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from orchestrator.db.base import Base, utcnow
from orchestrator.db.service_models import (
    ApiToken,
    Bisection,
    RepoEvent,
    SchedulerLease,
    TrackedRepository,
    WebhookAttempt,
    WebhookDelivery,
    apscheduler_jobs,
)

__all__ = [
    "Allocation",
    "ApiToken",
    "Artifact",
    "Bisection",
    "Decision",
    "Gate",
    "HealthCheck",
    "RepoEvent",
    "Run",
    "RunStep",
    "SchedulerLease",
    "SemanticVerdict",
    "TrackedRepository",
    "Verdict",
    "WebhookAttempt",
    "WebhookDelivery",
    "apscheduler_jobs",
]


class Allocation(Base):
    """One scheduler job's set of nodes/GPUs, held for a whole gate."""

    __tablename__ = "allocations"

    id: Mapped[int] = mapped_column(primary_key=True)
    scheduler_job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    executor: Mapped[str] = mapped_column(String(16), default="local")
    cluster: Mapped[str | None] = mapped_column(String(128))
    hostnames: Mapped[list] = mapped_column(default=list)
    num_nodes: Mapped[int] = mapped_column(default=1)
    gpu_model: Mapped[str | None] = mapped_column(String(128))
    gpus_per_node: Mapped[int | None]
    num_gpus: Mapped[int | None]
    topology: Mapped[str | None] = mapped_column(String(128), index=True)
    clock_bin: Mapped[str | None] = mapped_column(String(32))
    max_sm_clock_mhz: Mapped[float | None] = mapped_column(Float)
    power_limit_w: Mapped[float | None] = mapped_column(Float)
    health_verdict: Mapped[str] = mapped_column(String(16), default="unknown")
    driver_version: Mapped[str | None] = mapped_column(String(64))
    cuda_version: Mapped[str | None] = mapped_column(String(64))
    nccl_version: Mapped[str | None] = mapped_column(String(64))
    torch_version: Mapped[str | None] = mapped_column(String(64))
    criteria: Mapped[dict] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    health_checks: Mapped[list[HealthCheck]] = relationship(
        back_populates="allocation", cascade="all, delete-orphan", order_by="HealthCheck.id"
    )


class HealthCheck(Base):
    """One health-gate check on an allocation (DESIGN.md section 4)."""

    __tablename__ = "health_checks"

    id: Mapped[int] = mapped_column(primary_key=True)
    allocation_id: Mapped[int] = mapped_column(
        ForeignKey("allocations.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(8))
    host: Mapped[str | None] = mapped_column(String(255))
    measured: Mapped[dict] = mapped_column(default=dict)
    threshold: Mapped[dict] = mapped_column(default=dict)
    message: Mapped[str | None] = mapped_column(Text)
    raw: Mapped[dict] = mapped_column(default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    allocation: Mapped[Allocation] = relationship(back_populates="health_checks")




class Gate(Base):
    """An A/X/B gate (or re-gate, or bisection step) and its lifecycle state."""

    __tablename__ = "gates"

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="candidate", index=True)
    title: Mapped[str] = mapped_column(String(255), default="")
    family: Mapped[str | None] = mapped_column(String(255), index=True)
    tags: Mapped[list] = mapped_column(default=list)
    control_spec: Mapped[dict] = mapped_column(default=dict)
    candidate_spec: Mapped[dict] = mapped_column(default=dict)
    workload: Mapped[dict] = mapped_column(default=dict)
    recipe: Mapped[dict] = mapped_column(default=dict)
    recipe_name: Mapped[str | None] = mapped_column(String(255), index=True)
    topology_request: Mapped[dict] = mapped_column(default=dict)
    run_pattern: Mapped[str] = mapped_column(String(255), default="A X B")
    num_warmup_steps: Mapped[int] = mapped_column(default=10)
    num_measured_steps: Mapped[int] = mapped_column(default=20)
    policy: Mapped[str] = mapped_column(String(32), default="drift")
    policy_params: Mapped[dict] = mapped_column(default=dict)
    """Parameters of the verdict policy only (see ``orchestrator.verdict.policy``)."""
    options: Mapped[dict] = mapped_column(default=dict)
    """Non-policy options: ``orchestrator.domain.gate_spec.GateOptions`` as JSON."""
    control_history: Mapped[list | None] = mapped_column(default=None)
    """Control-median pairs of earlier gates of the same control identity, taken at
    dispatch; the allocation's extend decision and the stored verdict both use it."""
    control_history_gate_ids: Mapped[list | None] = mapped_column(default=None)
    """Id of the earlier gate of each ``control_history`` entry (linked from the verdict)."""
    design_seed: Mapped[int | None] = mapped_column(BigInteger, default=None)
    """Seed of the randomised run order of a sequential gate (``verdict.design``)."""
    executor: Mapped[str] = mapped_column(String(16), default="local")
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    status_reason: Mapped[str | None] = mapped_column(Text)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), unique=True)
    request_sha256: Mapped[str | None] = mapped_column(String(64))
    """SHA-256 of the canonical request JSON; a repeat of an idempotency key must match."""
    job_ref: Mapped[str | None] = mapped_column(String(128))
    job_folder: Mapped[str | None] = mapped_column(Text)
    allocation_id: Mapped[int | None] = mapped_column(
        ForeignKey("allocations.id", ondelete="SET NULL"), index=True
    )
    parent_gate_id: Mapped[int | None] = mapped_column(
        ForeignKey("gates.id", ondelete="SET NULL"), index=True
    )
    repository_id: Mapped[int | None] = mapped_column(
        ForeignKey("tracked_repositories.id", ondelete="SET NULL"), index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    submitted_at: Mapped[dt.datetime | None]
    started_at: Mapped[dt.datetime | None]
    ended_at: Mapped[dt.datetime | None]

    runs: Mapped[list[Run]] = relationship(
        back_populates="gate", cascade="all, delete-orphan", order_by="Run.order"
    )
    verdicts: Mapped[list[Verdict]] = relationship(
        back_populates="gate", cascade="all, delete-orphan", order_by="Verdict.id"
    )
    decisions: Mapped[list[Decision]] = relationship(
        back_populates="gate", cascade="all, delete-orphan", order_by="Decision.id",
        foreign_keys="Decision.gate_id",
    )
    semantic_verdicts: Mapped[list[SemanticVerdict]] = relationship(
        back_populates="gate", cascade="all, delete-orphan", order_by="SemanticVerdict.id"
    )
    allocation: Mapped[Allocation | None] = relationship()


class Run(Base):
    """One execution of a recipe at one source revision on one allocation."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    gate_id: Mapped[int | None] = mapped_column(
        ForeignKey("gates.id", ondelete="CASCADE"), index=True
    )
    allocation_id: Mapped[int | None] = mapped_column(
        ForeignKey("allocations.id", ondelete="SET NULL"), index=True
    )
    role: Mapped[str | None] = mapped_column(String(1))
    order: Mapped[int] = mapped_column(default=0)
    source_ref: Mapped[str | None] = mapped_column(String(255))
    source_sha: Mapped[str | None] = mapped_column(String(64))
    source_dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    env: Mapped[dict] = mapped_column(default=dict)
    command: Mapped[list] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    exit_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    slowest_rank_step_s: Mapped[list] = mapped_column(default=list)
    num_warmup_steps: Mapped[int | None]
    num_measured_steps: Mapped[int | None]
    median_step_s: Mapped[float | None] = mapped_column(Float)
    mfu_pct: Mapped[float | None] = mapped_column(Float)
    mfu_numerator_pct_s: Mapped[float | None] = mapped_column(Float)
    flops_per_sample: Mapped[int | None]
    peak_flops_per_gpu: Mapped[float | None] = mapped_column(Float)
    samples_per_s: Mapped[float | None] = mapped_column(Float)
    peak_allocated_bytes: Mapped[int | None]
    peak_reserved_bytes: Mapped[int | None]
    world_size: Mapped[int | None]
    local_batch_size: Mapped[int | None]
    grad_accum_steps: Mapped[int | None]
    versions: Mapped[dict] = mapped_column(default=dict)
    clocks: Mapped[dict] = mapped_column(default=dict)
    provenance: Mapped[dict] = mapped_column(default=dict)
    result_extra: Mapped[dict] = mapped_column(default=dict)
    semantics: Mapped[dict | None] = mapped_column(default=None)
    """What the run trained (batch, loss/grad-norm series, dtype coverage, probe):
    ``orchestrator.domain.record_semantics``'s stored form; None when it printed none."""
    steps_ingested_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    """Bytes of the run's step stream (``runs/NN-R.steps.jsonl``) already stored."""
    started_at: Mapped[dt.datetime | None]
    ended_at: Mapped[dt.datetime | None]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    gate: Mapped[Gate | None] = relationship(back_populates="runs")
    steps: Mapped[list[RunStep]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="RunStep.step"
    )
    artifacts: Mapped[list[Artifact]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Artifact.id"
    )

    __table_args__ = (UniqueConstraint("gate_id", "order"),)


class RunStep(Base):
    """One optimizer step of a run as the run reported it (visible while it runs)."""

    __tablename__ = "run_steps"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int]
    slowest_rank_step_s: Mapped[float | None] = mapped_column(Float)
    """Slowest rank's seconds; ``None`` when the line carried only the printing rank's
    own time (harness ``BF16_STEP``), which is then in ``rank_step_s``."""
    rank_step_s: Mapped[float | None] = mapped_column(Float)
    loss: Mapped[float | None] = mapped_column(Float)
    grad_norm: Mapped[float | None] = mapped_column(Float)
    phase: Mapped[str | None] = mapped_column(String(16))

    run: Mapped[Run] = relationship(back_populates="steps")

    __table_args__ = (UniqueConstraint("run_id", "step"),)


class Artifact(Base):
    """A raw file kept for a run, gate or allocation; the ledger keeps its SHA-256."""

    __tablename__ = "artifacts"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), index=True
    )
    gate_id: Mapped[int | None] = mapped_column(
        ForeignKey("gates.id", ondelete="CASCADE"), index=True
    )
    allocation_id: Mapped[int | None] = mapped_column(
        ForeignKey("allocations.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(32), default="log")
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int]
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    run: Mapped[Run | None] = relationship(back_populates="artifacts")

    __table_args__ = (
        # One import per log: concurrent imports of the same bytes create one run.
        Index("uq_artifacts_imported_log_sha256", "sha256", unique=True,
              postgresql_where=text("kind = 'imported_log'"),
              sqlite_where=text("kind = 'imported_log'")),
    )


class Verdict(Base):
    """A timing verdict computed by one policy (name + version + parameters)."""

    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(primary_key=True)
    gate_id: Mapped[int] = mapped_column(ForeignKey("gates.id", ondelete="CASCADE"), index=True)
    policy: Mapped[str] = mapped_column(String(32))
    policy_version: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict] = mapped_column(default=dict)
    verdict: Mapped[str] = mapped_column(String(16), index=True)
    numbers: Mapped[dict] = mapped_column(default=dict)
    is_primary: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    gate: Mapped[Gate] = relationship(back_populates="verdicts")


class SemanticVerdict(Base):
    """The semantic comparison of a gate (issue 19) and the decision it combines into."""

    __tablename__ = "semantic_verdicts"

    id: Mapped[int] = mapped_column(primary_key=True)
    gate_id: Mapped[int] = mapped_column(ForeignKey("gates.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(32), index=True)
    """``equal`` / ``within tolerance`` / ``changed`` / ``not comparable`` /
    ``declared change`` / ``not checked``."""
    timing_verdict: Mapped[str | None] = mapped_column(String(16))
    """The primary timing verdict it was combined with."""
    decision: Mapped[str | None] = mapped_column(String(32))
    """Timing and semantics combined, e.g. ``reject (semantics)``; the gate's decision
    unless a person records another (with a reason)."""
    numbers: Mapped[dict] = mapped_column(default=dict)
    """The evidence: floor, findings, batch and dtype facts, per-copy deviations."""
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    gate: Mapped[Gate] = relationship(back_populates="semantic_verdicts")


class Decision(Base):
    """What the team recorded for a gate. Append-only: the newest row supersedes."""

    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    gate_id: Mapped[int] = mapped_column(ForeignKey("gates.id", ondelete="CASCADE"), index=True)
    decided_by: Mapped[str] = mapped_column(String(255))
    """The identity that recorded it: the API token's name, or the OS user of an embedded
    CLI; never chosen by the client."""
    decision: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    note: Mapped[str] = mapped_column(Text, default="", server_default="")
    """Free text the client added (e.g. on whose behalf)."""
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="SET NULL"))
    """The API token used (``None`` for the embedded CLI)."""
    rerun_gate_id: Mapped[int | None] = mapped_column(
        ForeignKey("gates.id", ondelete="SET NULL"), default=None)
    """The gate a ``rerun`` decision queued."""
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    gate: Mapped[Gate] = relationship(back_populates="decisions", foreign_keys=[gate_id])
















Index("ix_runs_status", Run.status)
Index("ix_gates_created_at_id", Gate.created_at, Gate.id)
Index("ix_verdicts_verdict_is_primary", Verdict.verdict, Verdict.is_primary)
