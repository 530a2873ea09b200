"""Service tables around the ledger: tracked repositories of the nightly re-gate, their
events, bisections and webhook deliveries, API tokens, scheduler leases and APScheduler's
job store. Columns and relationships only."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    LargeBinary,
    String,
    Table,
    Text,
    Unicode,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from orchestrator.db.base import Base, utcnow

__all__ = [
    "ApiToken",
    "Bisection",
    "RepoEvent",
    "SchedulerLease",
    "TrackedRepository",
    "WebhookAttempt",
    "WebhookDelivery",
    "apscheduler_jobs",
]


class TrackedRepository(Base):
    """A repository branch that the nightly re-gate follows."""

    __tablename__ = "tracked_repositories"

    id: Mapped[int] = mapped_column(primary_key=True)
    url: Mapped[str] = mapped_column(Text)
    branch: Mapped[str] = mapped_column(String(255), default="main")
    workload: Mapped[dict] = mapped_column(default=dict)
    topology: Mapped[dict] = mapped_column(default=dict)
    executor: Mapped[str] = mapped_column(String(16), default="local")
    schedule: Mapped[str] = mapped_column(String(64), default="0 2 * * *")
    tolerance_pct: Mapped[float] = mapped_column(Float, default=0.5)
    notify: Mapped[list] = mapped_column(default=list)
    bisect: Mapped[bool] = mapped_column(Boolean, default=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    last_measured_sha: Mapped[str | None] = mapped_column(String(64))
    last_checked_at: Mapped[dt.datetime | None]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    options: Mapped[dict] = mapped_column(default=dict)
    """Gate parameters of every re-gate (run_pattern, warmup/measured steps, health,
    run_timeout_s, env); see ``orchestrator.schemas.repos.RegateOptions``."""
    webhook_secret: Mapped[str | None] = mapped_column(String(128))
    """Standard Webhooks signing secret (``whsec_`` + base64); shown once when created."""

    __table_args__ = (UniqueConstraint("url", "branch"),)


class ApiToken(Base):
    """An API token; only its SHA-256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list] = mapped_column(default=list)
    """What the token may do: ``read``, ``submit``, ``decide``, ``admin``."""
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[dt.datetime | None]


class RepoEvent(Base):
    """Something the re-gate scheduler concluded about a tracked branch.

    A row with ``gate_id`` marks that finished re-gate/bisection gate as processed
    (unique), so outcome processing is idempotent across restarts. ``kind`` is one of
    ``baseline``, ``pass``, ``regression``, ``improvement``, ``no_verdict``,
    ``check_failed``, ``bisect_step``, ``bisect_found``, ``bisect_failed``.
    """

    __tablename__ = "repo_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("tracked_repositories.id", ondelete="CASCADE"), index=True
    )
    gate_id: Mapped[int | None] = mapped_column(
        ForeignKey("gates.id", ondelete="SET NULL"), unique=True
    )
    bisection_id: Mapped[int | None] = mapped_column(
        ForeignKey("bisections.id", ondelete="SET NULL"), index=True
    )
    kind: Mapped[str] = mapped_column(String(24), index=True)
    control_sha: Mapped[str | None] = mapped_column(String(64))
    candidate_sha: Mapped[str | None] = mapped_column(String(64))
    verdict: Mapped[str | None] = mapped_column(String(16))
    delta_pct: Mapped[float | None] = mapped_column(Float)
    drift_pct: Mapped[float | None] = mapped_column(Float)
    control_median_s: Mapped[float | None] = mapped_column(Float)
    candidate_median_s: Mapped[float | None] = mapped_column(Float)
    carries_over: Mapped[bool] = mapped_column(Boolean, default=False)
    """True when the stopping point carries over to the candidate as timing-neutral."""
    alert: Mapped[bool] = mapped_column(Boolean, default=False)
    message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow, index=True)
    acknowledged_at: Mapped[dt.datetime | None] = mapped_column(default=None)
    """When a person acknowledged this alert (alerts page); None while it is open."""
    acknowledged_by: Mapped[str | None] = mapped_column(String(255), default=None)
    """The token name that acknowledged it."""


class Bisection(Base):
    """Binary search for the first bad commit between a regression's control and candidate.

    ``commits`` lists the SHAs after the good commit up to the bad one, oldest first;
    ``good_index`` (-1 means ``good_sha``) and ``bad_index`` index into it.
    """

    __tablename__ = "bisections"

    id: Mapped[int] = mapped_column(primary_key=True)
    repository_id: Mapped[int] = mapped_column(
        ForeignKey("tracked_repositories.id", ondelete="CASCADE"), index=True
    )
    regression_gate_id: Mapped[int] = mapped_column(
        ForeignKey("gates.id", ondelete="CASCADE"), unique=True
    )
    good_sha: Mapped[str] = mapped_column(String(64))
    bad_sha: Mapped[str] = mapped_column(String(64))
    commits: Mapped[list] = mapped_column(default=list)
    good_index: Mapped[int] = mapped_column(default=-1)
    bad_index: Mapped[int]
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    first_bad_sha: Mapped[str | None] = mapped_column(String(64))
    first_bad_gate_id: Mapped[int | None] = mapped_column(ForeignKey("gates.id", ondelete="SET NULL"))
    delta_pct: Mapped[float | None] = mapped_column(Float)
    drift_pct: Mapped[float | None] = mapped_column(Float)
    num_gates: Mapped[int] = mapped_column(default=0)
    message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[dt.datetime | None]


class WebhookDelivery(Base):
    """One notification of one event to one webhook URL (retried with backoff)."""

    __tablename__ = "webhook_deliveries"

    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("repo_events.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    num_attempts: Mapped[int] = mapped_column(default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[dt.datetime | None]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    attempts: Mapped[list[WebhookAttempt]] = relationship(
        back_populates="delivery", cascade="all, delete-orphan", order_by="WebhookAttempt.id"
    )

    __table_args__ = (UniqueConstraint("event_id", "url"),)


class WebhookAttempt(Base):
    """One HTTP POST of a delivery: status code or error, and how long it took."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), index=True
    )
    attempt: Mapped[int]
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float] = mapped_column(Float)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)

    delivery: Mapped[WebhookDelivery] = relationship(back_populates="attempts")


class SchedulerLease(Base):
    """A named lease: the one process holding it (until ``expires_at``) runs the scheduler."""

    __tablename__ = "scheduler_leases"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    acquired_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime]


apscheduler_jobs = Table(
    "apscheduler_jobs",
    Base.metadata,
    Column("id", Unicode(191), primary_key=True),
    Column("next_run_time", Float(25), index=True),
    Column("job_state", LargeBinary, nullable=False),
)
"""APScheduler 3's ``SQLAlchemyJobStore`` table (its own definition, created here by the
migration so the schema changes only through Alembic; the job store finds it existing)."""
