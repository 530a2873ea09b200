"""Tracked repositories, re-gate events, bisections, webhooks and drift (issue 7).

Every string that later reaches git (URL, branch) is validated here and only ever used
as one element of an argument list.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator

from orchestrator.domain.api_model import ApiModel, PublicModel
from orchestrator.domain.gate_spec import (
    HealthSpec,
    SideSpec,
    TopologySpec,
    WorkloadSpec,
    parse_pattern,
)
from orchestrator.domain.secrets import mask_env, mask_url
from orchestrator.schemas.drift import DriftPointPublic, DriftPublic, DriftSegmentPublic
from orchestrator.schemas.repo_events import (
    BisectionPublic,
    RepoEventPublic,
    WebhookAttemptPublic,
    WebhookDeliveryPublic,
)

__all__ = [
    "BisectionPublic",
    "CheckResultPublic",
    "DriftPointPublic",
    "DriftPublic",
    "DriftSegmentPublic",
    "RegateOptions",
    "RepoCreate",
    "RepoCreatedPublic",
    "RepoEventPublic",
    "RepoPublic",
    "RepoUpdate",
    "RepoViewPublic",
    "ReposPublic",
    "WebhookAttemptPublic",
    "WebhookDeliveryPublic",
    "validate_branch",
    "validate_cron",
    "validate_repo_url",
    "validate_webhook_url",
]

_URL_RE = re.compile(r"^(https?|ssh|git|file)://[A-Za-z0-9._~:@%/+=-]+$")
_SCP_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~/+-]+$")
_PATH_RE = re.compile(r"^/[A-Za-z0-9._~/+@=, -]*$")
# git check-ref-format rules for a branch name (no rev suffixes, unlike a gate's ref).
_BRANCH_RE = re.compile(
    r"^(?!-)(?!/)(?!.*\.\.)(?!.*//)(?!.*@\{)(?!.*\.lock$)(?!.*/$)(?!.*\.$)[A-Za-z0-9._/+-]{1,200}$"
)
DEFAULT_SCHEDULE = "0 2 * * *"
"""Nightly at 02:00 UTC."""


def validate_repo_url(value: str) -> str:
    """Accept a git URL (http(s), ssh, git, file), ``user@host:path`` or an absolute path.

    Raises:
        ValueError: Anything else (relative paths, option-like strings, odd characters).
    """
    value = value.strip()
    if len(value) > 2048 or not value:
        raise ValueError("url must be 1-2048 characters")
    if _URL_RE.match(value) or _SCP_RE.match(value) or (_PATH_RE.match(value) and ".." not in value):
        return value.rstrip("/") if value.startswith("/") and value != "/" else value
    raise ValueError(
        "url must be an http(s)://, ssh://, git:// or file:// URL, user@host:path, or an "
        "absolute path of a local repository"
    )


def validate_branch(value: str) -> str:
    """Accept a git branch name (``git check-ref-format --branch`` rules that matter).

    Raises:
        ValueError: Names starting with '-' or '/', holding '..', '//', '@{', ending in
            '.lock', '/' or '.', or characters outside ``[A-Za-z0-9._/+-]``.
    """
    if not _BRANCH_RE.match(value):
        raise ValueError(f"{value!r} is not a valid branch name")
    return value


def validate_cron(value: str) -> str:
    """Accept a five-field crontab expression (APScheduler's ``CronTrigger.from_crontab``).

    Raises:
        ValueError: The expression does not parse; the message is APScheduler's.
    """
    from apscheduler.triggers.cron import CronTrigger

    value = " ".join(value.split())
    if len(value.split()) != 5:
        raise ValueError("schedule must be a 5-field cron expression, e.g. '0 2 * * *'")
    try:
        CronTrigger.from_crontab(value, timezone="UTC")
    except ValueError as exc:
        raise ValueError(f"schedule {value!r} is not a valid cron expression: {exc}") from None
    return value


def validate_webhook_url(value: str) -> str:
    """Accept an ``http://`` or ``https://`` URL with a host.

    Raises:
        ValueError: Another scheme, no host, whitespace or more than 2048 characters.
    """
    parts = urlsplit(value)
    if (parts.scheme not in ("http", "https") or not parts.hostname or len(value) > 2048
            or any(c.isspace() for c in value)):
        raise ValueError(f"notification target {value!r} must be an http(s) URL with a host")
    return value


class RegateOptions(ApiModel):
    """Gate parameters of every re-gate and bisection step of a repository."""

    model_config = ConfigDict(extra="forbid")

    run_pattern: str = "A X B"
    """Order of runs on the allocation, e.g. ``A X B``."""
    warmup_steps: int = Field(10, ge=0, le=100000)
    """Warmup steps per run (not measured)."""
    measured_steps: int = Field(20, ge=1, le=100000)
    """Measured steps per run."""
    health: HealthSpec = Field(default_factory=HealthSpec)
    """Health gate of each re-gate."""
    run_timeout_s: float = Field(1800.0, gt=0)
    """Deadline of each run, seconds."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment overrides of both sides (same rules as a gate side's ``env``)."""
    policy: Literal["drift", "ratio-ci"] = "drift"
    """Verdict policy of the re-gates."""

    @field_validator("run_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        return " ".join(parse_pattern(value))

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        SideSpec(env=value)
        return value


class RepoCreate(ApiModel):
    """A branch to follow (``POST /repos``, ``axbgate repo add``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "url": "https://git.example.com/ltx2.git", "branch": "main",
        "workload": {"recipe": "ltx2-bench-h200"}, "executor": "slurm", "schedule": "0 2 * * *",
        "tolerance_pct": 0.5, "notify": ["https://hooks.example.com/axbgate"], "bisect": True}]})

    url: str
    """Repository URL or absolute path of a local repository."""
    branch: str = "main"
    """Branch to track."""
    workload: WorkloadSpec
    """What each re-gate runs."""
    topology: TopologySpec = Field(default_factory=TopologySpec)
    """Topology of each re-gate."""
    executor: Literal["local", "slurm", "debug"] | None = None
    """``None``: the service's default executor."""
    schedule: str = DEFAULT_SCHEDULE
    """Cron expression (UTC) of the checks."""
    tolerance_pct: float = Field(0.5, ge=0.0, le=50.0)
    """Re-gate tolerance, percent (DESIGN.md section 3 default 0.5)."""
    notify: list[str] = Field(default_factory=list, max_length=16)
    """Webhook URLs (http/https) that get a JSON POST for regressions, improvements and
    missing verdicts."""
    bisect: bool = False
    """Bisect a regression spanning more than one commit."""
    enabled: bool = True
    """Check this repository on its schedule."""
    options: RegateOptions = Field(default_factory=RegateOptions)
    """Re-gate options (pattern, steps, health, policy)."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return validate_repo_url(value)

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        return validate_branch(value)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return validate_cron(value)

    @field_validator("notify")
    @classmethod
    def _notify(cls, value: list[str]) -> list[str]:
        return [validate_webhook_url(v) for v in value]


class RepoUpdate(ApiModel):
    """A partial update (``PATCH /repos/{id}``); unset fields stay."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"tolerance_pct": 1.0, "enabled": False}]})

    branch: str | None = None
    """Branch to track (a new branch sets a new baseline)."""
    workload: WorkloadSpec | None = None
    """What each re-gate runs."""
    topology: TopologySpec | None = None
    """Topology of each re-gate."""
    executor: Literal["local", "slurm", "debug"] | None = None
    """Executor of the re-gates (None: the service default)."""
    schedule: str | None = None
    """Cron schedule (UTC) of the checks."""
    tolerance_pct: float | None = Field(None, ge=0.0, le=50.0)
    """Slowdown beyond this percent is a regression."""
    notify: list[str] | None = Field(None, max_length=16)
    """Webhook URLs notified of events."""
    bisect: bool | None = None
    """Bisect a regression to its first bad commit."""
    enabled: bool | None = None
    """Check this repository on its schedule."""
    options: RegateOptions | None = None
    """Re-gate options (pattern, steps, health, policy)."""
    last_measured_sha: str | None = None
    """Set the measured head by hand, e.g. to accept a known regression as the new
    baseline (it must be a commit of the repository)."""

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return None if value is None else validate_branch(value)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        return None if value is None else validate_cron(value)

    @field_validator("notify")
    @classmethod
    def _notify(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [validate_webhook_url(v) for v in value]

    @field_validator("last_measured_sha")
    @classmethod
    def _sha(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", value):
            raise ValueError("last_measured_sha must be a full 40- or 64-hex-digit commit id")
        return value

    @model_validator(mode="after")
    def _something(self) -> RepoUpdate:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change")
        return self


class RepoPublic(PublicModel):
    """A tracked repository branch."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    url: str
    """Repository URL (credentials masked)."""
    branch: str
    """Tracked branch name."""
    workload: dict[str, Any]
    """What each run executes: a bundled recipe or an external command."""
    topology: dict[str, Any]
    """Topology: nodes, GPUs per node and interconnect."""
    executor: str
    """Executor of the re-gates."""
    schedule: str
    """Cron schedule (UTC) of the checks."""
    tolerance_pct: float
    """Slowdown beyond this percent is a regression."""
    notify: list[str]
    """Webhook URLs notified of events."""
    bisect: bool
    """Bisect a regression to its first bad commit."""
    enabled: bool
    """The scheduler checks this repository."""
    options: dict[str, Any]
    """Re-gate options (env values masked)."""
    last_measured_sha: str | None
    """Head whose timing the last re-gate confirmed (or the baseline head)."""
    last_checked_at: dt.datetime | None
    """When the scheduler last read the branch head (UTC)."""
    health: Literal["healthy", "failing", "regression", "no_verdict", "unchecked", "disabled"] = "unchecked"
    """From the newest conclusion of the scheduler: ``failing`` (the last check could not
    read the branch), ``regression`` (the last re-gate or bisection found one),
    ``no_verdict`` (the last re-gate gave none), ``healthy`` (baseline, pass or
    improvement), ``unchecked`` (no check yet), ``disabled``."""
    health_reason: str | None = None
    """The message of the event that set ``health`` (None when healthy or unchecked)."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""

    @model_validator(mode="after")
    def _mask(self) -> RepoPublic:
        if isinstance(self.options.get("env"), dict):
            self.options = {**self.options, "env": mask_env(self.options["env"])}
        self.url = mask_url(self.url)
        return self


class RepoCreatedPublic(RepoPublic):
    """A tracked repository as created: with its webhook signing secret, shown once."""

    webhook_secret: str
    """Standard Webhooks secret (``whsec_...``) that signs every notification of this
    repository (``webhook-signature`` header); store it now, it is never shown again."""


class ReposPublic(PublicModel):
    """Tracked repositories."""

    data: list[RepoPublic]
    """Tracked repositories."""
    count: int
    """Number of items matching (all pages)."""


class RepoViewPublic(PublicModel):
    """A tracked repository with its recent events, bisections and deliveries."""

    repo: RepoPublic
    """The repository."""
    events: list[RepoEventPublic]
    """Recent events, newest first."""
    bisections: list[BisectionPublic]
    """Bisections, newest first."""
    deliveries: list[WebhookDeliveryPublic]
    """Recent webhook deliveries."""
    gate_ids_in_flight: list[int]
    """Gates of this repository queued or running now."""
    commit_subjects: dict[str, str] = {}
    """First line of the message of each commit shown (events, bisections), when readable."""
    bisection_warnings: list[str] = []
    """Bisections of one regression (overlapping commit ranges) that named different
    first bad commits."""


class CheckResultPublic(PublicModel):
    """What one check of a tracked branch did (``axbgate regate --once``)."""

    repository_id: int
    """Id of the tracked repository."""
    action: Literal["baseline", "submitted", "unchanged", "busy", "check_failed", "gave_up", "disabled"]
    """What the check did."""
    head_sha: str | None = None
    """Branch head read by the check."""
    gate_id: int | None = None
    """Re-gate submitted or waited for."""
    message: str = ""
    """Details of the check (errors included)."""
