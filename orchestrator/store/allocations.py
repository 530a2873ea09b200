"""Allocations and their health checks."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from orchestrator.db.models import Allocation, HealthCheck
from orchestrator.domain.errors import NotFound

__all__ = ["add_health_checks", "create_allocation", "get_allocation"]

_ALLOCATION_FIELDS = {
    c.key for c in Allocation.__table__.columns if c.key not in ("id", "created_at")
}


def create_allocation(*, session: Session, facts: dict[str, Any]) -> Allocation:
    """Insert an allocation from a fact dictionary (unknown keys go to ``criteria``-free
    columns only; the rest is ignored by design of the record contract).

    Args:
        session: Open session.
        facts: Keys named like :class:`Allocation` columns (``hostnames``, ``gpu_model``,
            ``health_verdict``, ...).

    Returns:
        The flushed :class:`Allocation`.
    """
    row = Allocation(**{k: v for k, v in facts.items() if k in _ALLOCATION_FIELDS and v is not None})
    session.add(row)
    session.flush()
    return row


def add_health_checks(
    *, session: Session, allocation: Allocation, checks: list[dict[str, Any]]
) -> list[HealthCheck]:
    """Attach health-check rows to an allocation.

    Args:
        session: Open session.
        allocation: The allocation they ran on.
        checks: Dicts with ``name``, ``status`` and optional ``host``, ``measured``,
            ``threshold``, ``message``, ``raw``.

    Returns:
        The flushed rows, in input order.
    """
    rows = [
        HealthCheck(
            allocation_id=allocation.id,
            name=c["name"],
            status=c["status"],
            host=c.get("host"),
            measured=c.get("measured") or {},
            threshold=c.get("threshold") or {},
            message=c.get("message"),
            raw=c.get("raw") or {},
        )
        for c in checks
    ]
    session.add_all(rows)
    session.flush()
    return rows


def get_allocation(*, session: Session, allocation_id: int) -> Allocation:
    """Return one allocation.

    Raises:
        NotFound: No allocation has that id.
    """
    row = session.get(Allocation, allocation_id)
    if row is None:
        raise NotFound("allocation", allocation_id)
    return row
