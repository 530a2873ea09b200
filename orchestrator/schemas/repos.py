"""Tracked repositories, re-gate events, bisections, webhooks and drift (issue 7).

Every string that later reaches git (URL, branch) is validated here and only ever used
as one element of an argument list.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.domain.gate_spec import (
    HealthSpec,
    SideSpec,
    TopologySpec,
    WorkloadSpec,
    parse_pattern,
)
from orchestrator.domain.secrets import mask_env, mask_url
from orchestrator.schemas.drift import DriftPointPublic, DriftPublic, DriftSegmentPublic

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


class RegateOptions(BaseModel):
    """Gate parameters of every re-gate and bisection step of a repository."""

    model_config = ConfigDict(extra="forbid")

    run_pattern: str = "A X B"
    warmup_steps: int = Field(10, ge=0, le=100000)
    measured_steps: int = Field(20, ge=1, le=100000)
    health: HealthSpec = Field(default_factory=HealthSpec)
    run_timeout_s: float = Field(1800.0, gt=0)
    """Deadline of each run, seconds."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment overrides of both sides (same rules as a gate side's ``env``)."""
    policy: Literal["drift", "ratio-ci"] = "drift"

    @field_validator("run_pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        return " ".join(parse_pattern(value))

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        SideSpec(env=value)
        return value


class RepoCreate(BaseModel):
    """A branch to follow (``POST /repos``, ``axbgate repo add``)."""

    model_config = ConfigDict(extra="forbid")

    url: str
    """Repository URL or absolute path of a local repository."""
    branch: str = "main"
    workload: WorkloadSpec
    topology: TopologySpec = Field(default_factory=TopologySpec)
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
    options: RegateOptions = Field(default_factory=RegateOptions)

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


class RepoUpdate(BaseModel):
    """A partial update (``PATCH /repos/{id}``); unset fields stay."""

    model_config = ConfigDict(extra="forbid")

    branch: str | None = None
    workload: WorkloadSpec | None = None
    topology: TopologySpec | None = None
    executor: Literal["local", "slurm", "debug"] | None = None
    schedule: str | None = None
    tolerance_pct: float | None = Field(None, ge=0.0, le=50.0)
    notify: list[str] | None = Field(None, max_length=16)
    bisect: bool | None = None
    enabled: bool | None = None
    options: RegateOptions | None = None
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


class RepoPublic(BaseModel):
    """A tracked repository branch."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    url: str
    branch: str
    workload: dict[str, Any]
    topology: dict[str, Any]
    executor: str
    schedule: str
    tolerance_pct: float
    notify: list[str]
    bisect: bool
    enabled: bool
    options: dict[str, Any]
    last_measured_sha: str | None
    """Head whose timing the last re-gate confirmed (or the baseline head)."""
    last_checked_at: dt.datetime | None
    created_at: dt.datetime

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


class ReposPublic(BaseModel):
    """Tracked repositories."""

    data: list[RepoPublic]
    count: int


class RepoEventPublic(BaseModel):
    """One conclusion of the scheduler about a tracked branch."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    repository_id: int
    gate_id: int | None
    bisection_id: int | None
    kind: str
    """baseline, pass, regression, improvement, no_verdict, check_failed, bisect_step,
    bisect_found, bisect_failed."""
    control_sha: str | None
    candidate_sha: str | None
    verdict: str | None
    delta_pct: float | None
    drift_pct: float | None
    control_median_s: float | None
    candidate_median_s: float | None
    carries_over: bool
    """The stopping point carries over to ``candidate_sha`` as timing-neutral."""
    alert: bool
    message: str
    created_at: dt.datetime
    acknowledged_at: dt.datetime | None = None
    """When a person acknowledged this alert; None while it is open."""
    acknowledged_by: str | None = None


class BisectionPublic(BaseModel):
    """A bisection of a regression and, once found, its first bad commit."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    repository_id: int
    regression_gate_id: int
    good_sha: str
    bad_sha: str
    commits: list[str]
    """SHAs after ``good_sha`` up to ``bad_sha``, oldest first."""
    good_index: int
    bad_index: int
    status: str
    """running, found or failed."""
    first_bad_sha: str | None
    first_bad_gate_id: int | None
    """The gate whose regression verdict established the first bad commit."""
    delta_pct: float | None
    """Delta of the first bad commit against the last good commit, percent."""
    drift_pct: float | None
    num_gates: int
    """Bisection gates run (the regression re-gate itself not counted)."""
    step_gate_ids: list[int] = []
    message: str
    created_at: dt.datetime
    finished_at: dt.datetime | None


class WebhookAttemptPublic(BaseModel):
    """One POST of a webhook delivery."""

    model_config = ConfigDict(from_attributes=True)

    attempt: int
    status_code: int | None
    error: str | None
    duration_s: float
    created_at: dt.datetime


class WebhookDeliveryPublic(BaseModel):
    """One notification to one URL with every attempt."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    event_id: int
    url: str
    payload: dict[str, Any]
    status: str
    """pending, delivered or failed."""
    num_attempts: int
    next_attempt_at: dt.datetime
    delivered_at: dt.datetime | None
    attempts: list[WebhookAttemptPublic]


class RepoViewPublic(BaseModel):
    """A tracked repository with its recent events, bisections and deliveries."""

    repo: RepoPublic
    events: list[RepoEventPublic]
    bisections: list[BisectionPublic]
    deliveries: list[WebhookDeliveryPublic]
    gate_ids_in_flight: list[int]
    commit_subjects: dict[str, str] = {}
    """First line of the message of each commit shown (events, bisections), when readable."""
    bisection_warnings: list[str] = []
    """Bisections of one regression (overlapping commit ranges) that named different
    first bad commits."""


class CheckResultPublic(BaseModel):
    """What one check of a tracked branch did (``axbgate regate --once``)."""

    repository_id: int
    action: Literal["baseline", "submitted", "unchanged", "busy", "check_failed", "gave_up", "disabled"]
    head_sha: str | None = None
    gate_id: int | None = None
    message: str = ""
