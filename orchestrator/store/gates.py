"""Gates."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate
from orchestrator.domain.errors import Conflict, NotFound

__all__ = [
    "claim_queued_gate",
    "count_gates_by",
    "create_gate",
    "earlier_succeeded_gates",
    "gate_in_flight_on",
    "get_gate",
    "gates_with_status",
    "get_gate_by_idempotency_key",
    "list_gates_in_flight",
    "lock_gate",
]

_GATE_FIELDS = {c.key for c in Gate.__table__.columns if c.key not in ("id", "created_at")}


def create_gate(*, session: Session, **fields: Any) -> Gate:
    """Insert a gate in state ``queued``.

    Raises:
        ValueError: A key is not a gate column.
        Conflict: The idempotency key is already used (a concurrent duplicate).
    """
    unknown = set(fields) - _GATE_FIELDS
    if unknown:
        raise ValueError(f"unknown gate fields: {', '.join(sorted(unknown))}")
    row = Gate(**fields)
    session.add(row)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"gate with idempotency key {fields.get('idempotency_key')!r} exists") from exc
    return row


def get_gate(*, session: Session, gate_id: int) -> Gate:
    """Return one gate.

    Raises:
        NotFound: No gate has that id.
    """
    row = session.get(Gate, gate_id)
    if row is None:
        raise NotFound("gate", gate_id)
    return row


def get_gate_by_idempotency_key(*, session: Session, key: str) -> Gate | None:
    """Return the gate created with ``key``, or ``None``."""
    return session.scalars(select(Gate).where(Gate.idempotency_key == key)).first()


def list_gates_in_flight(*, session: Session) -> list[Gate]:
    """Return gates that are queued, submitted or running, oldest first."""
    return list(
        session.scalars(
            select(Gate)
            .where(Gate.status.in_(("queued", "submitted", "running")))
            .order_by(Gate.id)
        )
    )


def lock_gate(*, session: Session, gate_id: int) -> Gate | None:
    """Take the gate's row lock for the rest of the transaction and return it fresh.

    A no-op UPDATE of the row is the lock on both databases: PostgreSQL locks the row,
    SQLite takes its database write lock. A second writer (another poller, a CLI
    following the same gate) blocks until this transaction ends and then reads what it
    committed, so each run is ingested by exactly one writer.

    Returns:
        The gate re-read after the lock, or ``None`` if it does not exist.
    """
    session.execute(update(Gate).where(Gate.id == gate_id).values(status=Gate.status)
                    .execution_options(synchronize_session=False))
    return session.get(Gate, gate_id, populate_existing=True)


def gate_in_flight_on(*, session: Session, executor: str, exclude_id: int) -> int | None:
    """Id of another gate of ``executor`` that is submitted or running, if any."""
    return session.scalar(
        select(Gate.id).where(Gate.executor == executor, Gate.id != exclude_id,
                              Gate.status.in_(("submitted", "running"))).limit(1)
    )


def claim_queued_gate(*, session: Session, gate_id: int, now: dt.datetime) -> bool:
    """Move a gate from ``queued`` to ``submitted`` with one conditional UPDATE.

    Returns:
        True when this caller's UPDATE changed the row (it owns the gate now).
    """
    result = session.execute(
        update(Gate).where(Gate.id == gate_id, Gate.status == "queued")
        .values(status="submitted", submitted_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    return result.rowcount == 1


def earlier_succeeded_gates(*, session: Session, gate: Gate, limit: int) -> list[Gate]:
    """Succeeded gates other than ``gate`` with the same recipe name, newest first."""
    return list(session.scalars(
        select(Gate).where(Gate.id != gate.id, Gate.status == "succeeded",
                           Gate.recipe_name == gate.recipe_name)
        .order_by(Gate.id.desc()).limit(limit)
    ))


def gates_with_status(*, session: Session, statuses: tuple[str, ...],
                      gate_ids: list[int] | None = None) -> list[Gate]:
    """Gates in one of ``statuses`` (only those in ``gate_ids`` when given), oldest first."""
    query = select(Gate).where(Gate.status.in_(statuses)).order_by(Gate.id)
    if gate_ids is not None:
        query = query.where(Gate.id.in_(gate_ids))
    return list(session.scalars(query))


def count_gates_by(*, session: Session, column: str, statuses: tuple[str, ...] | None = None) -> dict[str, int]:
    """Number of gates per value of ``column`` (``status`` or ``executor``), one GROUP BY
    (only gates in ``statuses`` when given)."""
    col = getattr(Gate, column)
    stmt = select(col, func.count()).group_by(col)
    if statuses is not None:
        stmt = stmt.where(Gate.status.in_(statuses))
    return {str(value): int(count) for value, count in session.execute(stmt)}
