"""What the re-gate scheduler recorded about a tracked repository: events, bisections and
webhook deliveries with their attempts."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ConfigDict, model_validator

from orchestrator.domain.api_model import PublicModel

__all__ = ["BisectionPublic", "RepoEventPublic", "WebhookAttemptPublic", "WebhookDeliveryPublic"]


class RepoEventPublic(PublicModel):
    """One conclusion of the scheduler about a tracked branch."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    repository_id: int
    """Id of the tracked repository."""
    gate_id: int | None
    """Id of the gate this belongs to."""
    bisection_id: int | None
    """Id of the bisection this event belongs to."""
    kind: str
    """baseline, pass, regression, improvement, no_verdict, check_failed, bisect_step,
    bisect_found, bisect_failed."""
    control_sha: str | None
    """Measured head (control) commit."""
    candidate_sha: str | None
    """New head (candidate) commit."""
    verdict: str | None
    """Timing verdict: ``accept``, ``reject``, ``neutral``, ``inconclusive`` (re-gates: ``pass``,
    ``regression``, ``improvement``)."""
    delta_pct: float | None
    """Candidate change versus the control midpoint, percent (positive: slower)."""
    drift_pct: float | None
    """Control drift between A and B, percent of the midpoint."""
    control_median_s: float | None
    """Control midpoint, seconds per step."""
    candidate_median_s: float | None
    """Candidate median, seconds per step."""
    carries_over: bool
    """The stopping point carries over to ``candidate_sha`` as timing-neutral."""
    alert: bool
    """The event needs attention (regression, failed check)."""
    message: str
    """What happened."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    acknowledged_at: dt.datetime | None = None
    """When a person acknowledged this alert (alerts page); None while it is open."""
    acknowledged_by: str | None = None
    """The token name that acknowledged it."""


class BisectionPublic(PublicModel):
    """A bisection of a regression and, once found, its first bad commit."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    repository_id: int
    """Id of the tracked repository."""
    regression_gate_id: int
    """Id of the re-gate that flagged the regression."""
    good_sha: str
    """Last commit known good."""
    bad_sha: str
    """First commit known bad at the start."""
    commits: list[str]
    """SHAs after ``good_sha`` up to ``bad_sha``, oldest first."""
    good_index: int
    """Index of the good commit in the range."""
    bad_index: int
    """Index of the bad commit in the range."""
    status: str
    """running, found or failed."""
    first_bad_sha: str | None
    """First bad commit found; None until found."""
    first_bad_gate_id: int | None
    """The gate whose regression verdict established the first bad commit."""
    delta_pct: float | None
    """Delta of the first bad commit against the last good commit, percent."""
    drift_pct: float | None
    """Control drift of the regression gate, percent."""
    num_gates: int
    """Bisection gates run (the regression re-gate itself not counted)."""
    step_gate_ids: list[int] = []
    """Gates the bisection ran, in order."""
    message: str
    """Outcome of the bisection."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""
    finished_at: dt.datetime | None
    """When it finished (UTC)."""


class WebhookAttemptPublic(PublicModel):
    """One POST of a webhook delivery."""

    model_config = ConfigDict(from_attributes=True)

    attempt: int
    """Attempt number, from 1."""
    status_code: int | None
    """HTTP status of the receiver's answer; None when none came."""
    error: str | None
    """Why it failed; None on success."""
    duration_s: float
    """Duration of the attempt, seconds."""
    created_at: dt.datetime
    """When the row was stored (UTC)."""


class WebhookDeliveryPublic(PublicModel):
    """One notification to one URL with every attempt."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    """Ledger id (primary key)."""
    event_id: int
    """Id of the repository event this delivery notifies."""
    url: str
    """Receiver URL."""
    payload: dict[str, Any]
    """JSON body sent."""
    status: str
    """pending, delivered or failed."""
    num_attempts: int
    """Attempts made so far."""
    next_attempt_at: dt.datetime
    """When the next attempt is due (UTC)."""
    delivered_at: dt.datetime | None
    """When the receiver answered 2xx (UTC)."""
    attempts: list[WebhookAttemptPublic]
    """Every attempt, oldest first."""
    last_status_code: int | None = None
    """HTTP status of the newest attempt (None before any, or when no answer came)."""
    last_error: str | None = None
    """Why the newest attempt failed; None before any attempt and when it succeeded (a
    2xx answer is not an error: show ``last_status_code`` for it)."""

    @model_validator(mode="after")
    def _last_attempt(self) -> WebhookDeliveryPublic:
        if self.attempts:
            newest = max(self.attempts, key=lambda a: a.attempt)
            self.last_status_code, self.last_error = newest.status_code, newest.error
        return self
