"""Semantic verdicts: one row per judgement of a gate's semantics; the newest wins."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import SemanticVerdict

__all__ = ["latest_semantic_verdict", "save_semantic_verdict"]


def save_semantic_verdict(*, session: Session, gate_id: int, status: str, timing_verdict: str | None,
                          decision: str | None, numbers: dict[str, Any]) -> SemanticVerdict:
    """Store a semantic verdict (earlier ones stay as history).

    Returns:
        The flushed :class:`SemanticVerdict`.
    """
    row = SemanticVerdict(gate_id=gate_id, status=status, timing_verdict=timing_verdict,
                          decision=decision, numbers=numbers)
    session.add(row)
    session.flush()
    return row


def latest_semantic_verdict(*, session: Session, gate_id: int) -> SemanticVerdict | None:
    """Return the newest semantic verdict of a gate, or ``None``."""
    return session.scalars(select(SemanticVerdict).where(SemanticVerdict.gate_id == gate_id)
                           .order_by(SemanticVerdict.id.desc())).first()
