"""Gates."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate
from orchestrator.errors import Conflict, NotFound

__all__ = ["create_gate", "get_gate", "get_gate_by_idempotency_key", "list_gates_in_flight"]

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
