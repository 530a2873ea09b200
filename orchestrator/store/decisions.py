"""Decisions: append-only; the newest row for a gate supersedes the older ones."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import Decision

__all__ = ["add_decision", "current_decision", "decision_history"]


def add_decision(
    *, session: Session, gate_id: int, decided_by: str, decision: str, reason: str,
    note: str = "", token_id: int | None = None, rerun_gate_id: int | None = None,
) -> Decision:
    """Append a decision row (never updates or deletes); ``rerun_gate_id`` is the gate a
    ``rerun`` decision queued."""
    row = Decision(gate_id=gate_id, decided_by=decided_by, decision=decision, reason=reason,
                   note=note, token_id=token_id, rerun_gate_id=rerun_gate_id)
    session.add(row)
    session.flush()
    return row


def decision_history(*, session: Session, gate_id: int) -> list[Decision]:
    """Return all decisions for a gate, oldest first."""
    return list(
        session.scalars(select(Decision).where(Decision.gate_id == gate_id).order_by(Decision.id))
    )


def current_decision(*, session: Session, gate_id: int) -> Decision | None:
    """Return the newest decision for a gate, or ``None``."""
    return session.scalars(
        select(Decision).where(Decision.gate_id == gate_id).order_by(Decision.id.desc())
    ).first()
