"""Tracked repositories, their re-gate events and bisections (SQL only; flush, never commit)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from orchestrator.db.models import Bisection, Gate, RepoEvent, TrackedRepository
from orchestrator.domain.errors import Conflict, NotFound

__all__ = [
    "alert_events",
    "get_event",
    "add_event",
    "bisection_of_step",
    "bisections_of_repo",
    "count_events",
    "create_bisection",
    "create_repo",
    "delete_repo",
    "events_of_repo",
    "finished_unprocessed_gates",
    "gates_in_flight",
    "get_bisection",
    "get_repo",
    "list_repos",
    "running_bisection",
    "step_gate_ids",
    "update_repo",
]

_REPO_FIELDS = {c.key for c in TrackedRepository.__table__.columns if c.key not in ("id", "created_at")}
_EVENT_FIELDS = {c.key for c in RepoEvent.__table__.columns if c.key not in ("id", "created_at")}
REGATE_KINDS = ("regate", "bisect")
TERMINAL = ("succeeded", "failed", "cancelled")


def create_repo(*, session: Session, **fields: Any) -> TrackedRepository:
    """Insert a tracked repository.

    Raises:
        ValueError: A key is not a column.
        Conflict: The (url, branch) pair is already tracked.
    """
    unknown = set(fields) - _REPO_FIELDS
    if unknown:
        raise ValueError(f"unknown repository fields: {', '.join(sorted(unknown))}")
    row = TrackedRepository(**fields)
    session.add(row)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"{fields.get('url')} branch {fields.get('branch')} is already tracked") from exc
    return row


def get_repo(*, session: Session, repo_id: int) -> TrackedRepository:
    """Return one tracked repository.

    Raises:
        NotFound: No repository has that id.
    """
    row = session.get(TrackedRepository, repo_id)
    if row is None:
        raise NotFound("repo", repo_id)
    return row


def list_repos(*, session: Session, enabled_only: bool = False) -> list[TrackedRepository]:
    """Return tracked repositories by id."""
    query = select(TrackedRepository).order_by(TrackedRepository.id)
    if enabled_only:
        query = query.where(TrackedRepository.enabled.is_(True))
    return list(session.scalars(query))


def update_repo(*, session: Session, repo: TrackedRepository, **fields: Any) -> TrackedRepository:
    """Set columns of a tracked repository.

    Raises:
        ValueError: A key is not a column.
        Conflict: The new (url, branch) pair is already tracked.
    """
    unknown = set(fields) - _REPO_FIELDS
    if unknown:
        raise ValueError(f"unknown repository fields: {', '.join(sorted(unknown))}")
    for key, value in fields.items():
        setattr(repo, key, value)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"{repo.url} branch {repo.branch} is already tracked") from exc
    return repo


def delete_repo(*, session: Session, repo_id: int) -> None:
    """Delete a tracked repository with its events and bisections (gates stay).

    Raises:
        NotFound: No repository has that id.
    """
    get_repo(session=session, repo_id=repo_id)
    session.execute(delete(TrackedRepository).where(TrackedRepository.id == repo_id))
    session.flush()
    session.expunge_all()


def add_event(*, session: Session, **fields: Any) -> RepoEvent:
    """Insert a repository event.

    Raises:
        ValueError: A key is not a column.
        Conflict: The gate already has an event (processed by another pass).
    """
    unknown = set(fields) - _EVENT_FIELDS
    if unknown:
        raise ValueError(f"unknown event fields: {', '.join(sorted(unknown))}")
    row = RepoEvent(**fields)
    session.add(row)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"gate {fields.get('gate_id')} was already processed") from exc
    return row


def events_of_repo(*, session: Session, repo_id: int, kinds: tuple[str, ...] | None = None,
                   limit: int | None = None, oldest_first: bool = False) -> list[RepoEvent]:
    """Return events of a repository (newest first unless ``oldest_first``)."""
    order = RepoEvent.id.asc() if oldest_first else RepoEvent.id.desc()
    query = select(RepoEvent).where(RepoEvent.repository_id == repo_id).order_by(order)
    if kinds is not None:
        query = query.where(RepoEvent.kind.in_(kinds))
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def count_events(*, session: Session, repo_id: int, kind: str, control_sha: str | None,
                 candidate_sha: str | None) -> int:
    """Count events of one kind for one (control, candidate) pair of a repository."""
    return session.scalar(
        select(func.count(RepoEvent.id)).where(
            RepoEvent.repository_id == repo_id, RepoEvent.kind == kind,
            RepoEvent.control_sha == control_sha, RepoEvent.candidate_sha == candidate_sha,
        )
    ) or 0


def gates_in_flight(*, session: Session, repo_id: int) -> list[Gate]:
    """Re-gate and bisection gates of a repository that are not finished, or finished
    but not yet processed (no event)."""
    processed = select(RepoEvent.gate_id).where(RepoEvent.gate_id.is_not(None))
    return list(session.scalars(
        select(Gate).where(Gate.repository_id == repo_id, Gate.kind.in_(REGATE_KINDS),
                           Gate.id.not_in(processed)).order_by(Gate.id)
    ))


def finished_unprocessed_gates(*, session: Session) -> list[int]:
    """Ids of finished re-gate/bisection gates of tracked repositories without an event."""
    processed = select(RepoEvent.gate_id).where(RepoEvent.gate_id.is_not(None))
    return list(session.scalars(
        select(Gate.id).where(Gate.repository_id.is_not(None), Gate.kind.in_(REGATE_KINDS),
                              Gate.status.in_(TERMINAL), Gate.id.not_in(processed))
        .order_by(Gate.id)
    ))


def create_bisection(*, session: Session, **fields: Any) -> Bisection:
    """Insert a bisection.

    Raises:
        Conflict: The regression gate already has a bisection.
    """
    row = Bisection(**fields)
    session.add(row)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"gate {fields.get('regression_gate_id')} is already bisected") from exc
    return row


def get_bisection(*, session: Session, bisection_id: int) -> Bisection:
    """Return one bisection.

    Raises:
        NotFound: No bisection has that id.
    """
    row = session.get(Bisection, bisection_id)
    if row is None:
        raise NotFound("bisection", bisection_id)
    return row


def running_bisection(*, session: Session, repo_id: int) -> Bisection | None:
    """Return the repository's running bisection, if any."""
    return session.scalars(
        select(Bisection).where(Bisection.repository_id == repo_id, Bisection.status == "running")
    ).first()


def bisection_of_step(*, session: Session, gate: Gate) -> Bisection | None:
    """Return the bisection a ``bisect`` gate belongs to (through its parent gate)."""
    if gate.parent_gate_id is None:
        return None
    return session.scalars(
        select(Bisection).where(Bisection.regression_gate_id == gate.parent_gate_id)
    ).first()


def bisections_of_repo(*, session: Session, repo_id: int, limit: int = 20) -> list[Bisection]:
    """Return the repository's bisections, newest first."""
    return list(session.scalars(
        select(Bisection).where(Bisection.repository_id == repo_id)
        .order_by(Bisection.id.desc()).limit(limit)
    ))


def step_gate_ids(*, session: Session, bisection: Bisection) -> list[int]:
    """Ids of the bisection's step gates, oldest first."""
    return list(session.scalars(
        select(Gate.id).where(Gate.kind == "bisect", Gate.parent_gate_id == bisection.regression_gate_id)
        .order_by(Gate.id)
    ))


def alert_events(*, session: Session, include_acknowledged: bool = False,
                 limit: int = 200) -> list[tuple[RepoEvent, TrackedRepository]]:
    """Alert events of every repository with their repository, newest first.

    Args:
        session: Open session.
        include_acknowledged: Also return alerts a person acknowledged.
        limit: Rows at most.
    """
    query = (select(RepoEvent, TrackedRepository)
             .join(TrackedRepository, TrackedRepository.id == RepoEvent.repository_id)
             .where(RepoEvent.alert.is_(True)).order_by(RepoEvent.id.desc()).limit(limit))
    if not include_acknowledged:
        query = query.where(RepoEvent.acknowledged_at.is_(None))
    return [(ev, repo) for ev, repo in session.execute(query).all()]


def get_event(*, session: Session, event_id: int) -> RepoEvent:
    """Return one repository event.

    Raises:
        NotFound: No event has that id.
    """
    row = session.get(RepoEvent, event_id)
    if row is None:
        raise NotFound("repository event", event_id)
    return row
