"""Verdicts: one row per (gate, policy) computation."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator.db.models import Verdict

__all__ = ["latest_verdicts", "save_verdict", "verdicts_of_gates"]


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


def verdicts_of_gates(
    *, session: Session, gate_ids: list[int]
) -> dict[int, list[tuple[str, str, bool, dict[str, Any]]]]:
    """Return the newest verdict per policy of each gate, light (no ORM objects).

    Args:
        session: Open session.
        gate_ids: Gates of one page (one query for all of them).

    Returns:
        ``{gate_id: [(policy, verdict, is_primary, numbers), ...]}``, primary first, then
        by policy name; gates without a verdict are absent.
    """
    if not gate_ids:
        return {}
    rows = session.execute(
        select(Verdict.gate_id, Verdict.policy, Verdict.verdict, Verdict.is_primary,
               Verdict.numbers)
        .where(Verdict.gate_id.in_(list(gate_ids)))
        .order_by(Verdict.id.desc())
    ).all()
    newest: dict[tuple[int, str], tuple[str, str, bool, dict[str, Any]]] = {}
    for gate_id, policy, verdict, is_primary, numbers in rows:
        newest.setdefault((gate_id, policy), (policy, verdict, bool(is_primary), numbers or {}))
    out: dict[int, list[tuple[str, str, bool, dict[str, Any]]]] = {}
    for (gate_id, _policy), item in newest.items():
        out.setdefault(gate_id, []).append(item)
    for items in out.values():
        items.sort(key=lambda item: (not item[2], item[0]))
    return out
