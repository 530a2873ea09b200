"""Verdicts: one row per (gate, policy) computation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator.db.models import Verdict

__all__ = ["latest_verdicts", "save_verdict"]


def save_verdict(
    *,
    session: Session,
    gate_id: int,
    policy: str,
    policy_version: str,
    params: dict[str, Any],
    verdict: str,
    numbers: dict[str, Any],
    is_primary: bool = True,
) -> Verdict:
    """Store a verdict. Earlier verdicts of the same policy on the gate stay (history);
    when ``is_primary`` the gate's other primary verdicts are demoted.

    Returns:
        The flushed :class:`Verdict`.
    """
    if is_primary:
        session.execute(
            update(Verdict)
            .where(Verdict.gate_id == gate_id, Verdict.is_primary.is_(True))
            .values(is_primary=False)
        )
    row = Verdict(
        gate_id=gate_id,
        policy=policy,
        policy_version=policy_version,
        params=params,
        verdict=verdict,
        numbers=numbers,
        is_primary=is_primary,
    )
    session.add(row)
    session.flush()
    return row


def latest_verdicts(*, session: Session, gate_id: int) -> list[Verdict]:
    """Return the newest verdict per policy for a gate, primary first."""
    rows = session.scalars(
        select(Verdict).where(Verdict.gate_id == gate_id).order_by(Verdict.id.desc())
    )
    seen: dict[str, Verdict] = {}
    for row in rows:
        seen.setdefault(row.policy, row)
    return sorted(seen.values(), key=lambda v: (not v.is_primary, v.policy))
