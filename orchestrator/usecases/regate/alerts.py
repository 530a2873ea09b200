"""Use cases: alerts of every tracked repository, and acknowledging one."""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.errors import ValidationFailed
from orchestrator.schemas.alerts import AlertPublic, AlertsPublic
from orchestrator.schemas.repo_events import RepoEventPublic

__all__ = ["acknowledge_alert", "list_alerts"]

logger = logging.getLogger(__name__)


def _public(event, repo) -> AlertPublic:
    base = RepoEventPublic.model_validate(event).model_dump()
    return AlertPublic(**base, repository_url=repo.url, branch=repo.branch)


def list_alerts(*, session: Session, include_acknowledged: bool = False,
                limit: int = 200) -> AlertsPublic:
    """Alerts (regression, improvement, no verdict, failed check or bisection) of every
    tracked repository, newest first; acknowledged ones only when asked."""
    rows = store.repos.alert_events(session=session, include_acknowledged=include_acknowledged,
                                    limit=limit)
    data = [_public(ev, repo) for ev, repo in rows]
    return AlertsPublic(data=data, num_open=sum(a.acknowledged_at is None for a in data))


def acknowledge_alert(*, session: Session, event_id: int, acknowledged_by: str) -> AlertPublic:
    """Mark an alert as seen (idempotent: a second acknowledgement keeps the first).

    Args:
        session: Open session (the caller commits).
        event_id: The repository event.
        acknowledged_by: The token's name.

    Raises:
        NotFound: No event has that id.
        ValidationFailed: The event is not an alert.
    """
    event = store.repos.get_event(session=session, event_id=event_id)
    if not event.alert:
        raise ValidationFailed("event_id", f"event {event_id} ({event.kind}) is not an alert")
    if event.acknowledged_at is None:
        event.acknowledged_at = dt.datetime.now(dt.timezone.utc)
        event.acknowledged_by = acknowledged_by
        session.flush()
        session.refresh(event)  # the stored value (the same on every backend and every read)
        logger.info("alert event=%s acknowledged by %s", event_id, acknowledged_by)
    repo = store.repos.get_repo(session=session, repo_id=event.repository_id)
    return _public(event, repo)
