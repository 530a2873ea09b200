"""Webhook deliveries and their attempts; the scheduler lease (SQL only; flush, never commit)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from orchestrator.db.models import (
    RepoEvent,
    SchedulerLease,
    TrackedRepository,
    WebhookAttempt,
    WebhookDelivery,
)

__all__ = [
    "add_attempt",
    "create_delivery",
    "deliveries_of_repo",
    "due_deliveries",
    "release_lease",
    "secret_of_delivery",
    "try_acquire_lease",
]


def create_delivery(*, session: Session, event_id: int, url: str, payload: dict[str, Any]) -> WebhookDelivery:
    """Queue one notification of an event to one URL (due now)."""
    row = WebhookDelivery(event_id=event_id, url=url, payload=payload, status="pending")
    session.add(row)
    session.flush()
    return row


def due_deliveries(*, session: Session, now: dt.datetime, limit: int = 50) -> list[WebhookDelivery]:
    """Pending deliveries whose next attempt is due, oldest first."""
    return list(session.scalars(
        select(WebhookDelivery).where(WebhookDelivery.status == "pending",
                                      WebhookDelivery.next_attempt_at <= now)
        .order_by(WebhookDelivery.id).limit(limit)
    ))


def secret_of_delivery(*, session: Session, delivery: WebhookDelivery) -> str | None:
    """The webhook signing secret of the repository whose event a delivery carries."""
    return session.scalar(
        select(TrackedRepository.webhook_secret)
        .join(RepoEvent, RepoEvent.repository_id == TrackedRepository.id)
        .where(RepoEvent.id == delivery.event_id)
    )


def add_attempt(*, session: Session, delivery: WebhookDelivery, status_code: int | None,
                error: str | None, duration_s: float) -> WebhookAttempt:
    """Record one POST of a delivery and bump its attempt counter."""
    delivery.num_attempts += 1
    row = WebhookAttempt(delivery_id=delivery.id, attempt=delivery.num_attempts,
                         status_code=status_code, error=error, duration_s=duration_s)
    session.add(row)
    session.flush()
    return row


def deliveries_of_repo(*, session: Session, repo_id: int, limit: int = 50) -> list[WebhookDelivery]:
    """Deliveries of a repository's events, newest first."""
    return list(session.scalars(
        select(WebhookDelivery).join(RepoEvent, RepoEvent.id == WebhookDelivery.event_id)
        .where(RepoEvent.repository_id == repo_id).order_by(WebhookDelivery.id.desc()).limit(limit)
    ))


def try_acquire_lease(*, session: Session, name: str, holder: str, now: dt.datetime,
                      duration_s: float) -> bool:
    """Take or renew the lease ``name`` for ``holder`` (one conditional UPDATE).

    The UPDATE succeeds when the lease is ours or expired; a missing row is inserted.
    Both statements are atomic in SQLite and PostgreSQL, so two processes racing for
    the lease cannot both win.

    Args:
        session: Open session; the caller commits right after.
        name: Lease name, e.g. ``"nightly"``.
        holder: Identity of this process (host, pid, random suffix).
        now: Current time (aware UTC).
        duration_s: Lease length, seconds.

    Returns:
        True when ``holder`` holds the lease until ``now + duration_s``.
    """
    expires = now + dt.timedelta(seconds=duration_s)
    result = session.execute(
        update(SchedulerLease)
        .where(SchedulerLease.name == name,
               (SchedulerLease.holder == holder) | (SchedulerLease.expires_at < now))
        .values(holder=holder, expires_at=expires)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount == 1:
        return True
    if session.get(SchedulerLease, name) is not None:
        return False
    try:
        with session.begin_nested():
            session.add(SchedulerLease(name=name, holder=holder, acquired_at=now, expires_at=expires))
            session.flush()
    except IntegrityError:
        return False  # another process inserted it first
    return True


def release_lease(*, session: Session, name: str, holder: str) -> None:
    """Give the lease up (expire it now) if ``holder`` holds it."""
    session.execute(
        update(SchedulerLease)
        .where(SchedulerLease.name == name, SchedulerLease.holder == holder)
        .values(expires_at=dt.datetime(1970, 1, 1, tzinfo=dt.UTC))
        .execution_options(synchronize_session=False)
    )
    session.flush()
