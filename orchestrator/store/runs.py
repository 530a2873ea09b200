"""Runs and their per-step records."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from orchestrator.db.models import Run, RunStep
from orchestrator.domain.errors import NotFound

__all__ = ["add_steps", "count_steps", "create_run", "get_run", "list_steps", "update_run"]

_STEP_CHUNK = 10_000
"""Rows per executemany of step records."""

_RUN_FIELDS = {c.key for c in Run.__table__.columns if c.key not in ("id", "created_at")}


def create_run(*, session: Session, **fields: Any) -> Run:
    """Insert a run.

    Args:
        session: Open session.
        **fields: Column values (``role``, ``order``, ``gate_id``, ...).

    Returns:
        The flushed :class:`Run`.

    Raises:
        ValueError: A key is not a run column.
    """
    unknown = set(fields) - _RUN_FIELDS
    if unknown:
        raise ValueError(f"unknown run fields: {', '.join(sorted(unknown))}")
    row = Run(**fields)
    session.add(row)
    session.flush()
    return row


def update_run(*, session: Session, run: Run, **fields: Any) -> Run:
    """Set columns on a run and flush.

    Raises:
        ValueError: A key is not a run column.
    """
    unknown = set(fields) - _RUN_FIELDS
    if unknown:
        raise ValueError(f"unknown run fields: {', '.join(sorted(unknown))}")
    for key, value in fields.items():
        setattr(run, key, value)
    session.flush()
    return run


def _finite(value: Any) -> float | None:
    return value if isinstance(value, float) and math.isfinite(value) else (
        float(value) if isinstance(value, int) and not isinstance(value, bool) else None)


def add_steps(*, session: Session, run: Run, steps: Iterable[dict[str, Any]]) -> int:
    """Store per-step records; idempotent on (run, step): a step already stored is skipped.

    Inserted with ``INSERT ... ON CONFLICT DO NOTHING`` as an executemany in chunks of
    :data:`_STEP_CHUNK` rows (the iterable is consumed lazily), so a repeated or concurrent
    ingest of the same steps never fails on the (run, step) constraint and a million
    steps never sit in memory at once. A non-finite time, loss or gradient norm is stored
    as NULL (the run's error names it).

    Args:
        session: Open session.
        run: The run.
        steps: Dicts with ``step`` and optional ``slowest_rank_step_s``, ``rank_step_s``,
            ``loss``, ``grad_norm``, ``phase``.

    Returns:
        How many step records were offered (duplicates included).
    """
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    stmt = insert(RunStep.__table__).on_conflict_do_nothing(index_elements=["run_id", "step"])
    count = 0
    batch: list[dict[str, Any]] = []
    for s in steps:
        batch.append({"run_id": run.id, "step": s["step"],
                      "slowest_rank_step_s": _finite(s.get("slowest_rank_step_s")),
                      "rank_step_s": _finite(s.get("rank_step_s")), "loss": _finite(s.get("loss")),
                      "grad_norm": _finite(s.get("grad_norm")), "phase": s.get("phase")})
        if len(batch) >= _STEP_CHUNK:
            session.execute(stmt, batch)
            count += len(batch)
            batch = []
    if batch:
        session.execute(stmt, batch)
        count += len(batch)
    session.flush()
    return count


def list_steps(*, session: Session, run_id: int, offset: int, limit: int) -> list[RunStep]:
    """One page of a run's step records, in step order.

    Args:
        session: Open session.
        run_id: The run.
        offset: Step records to skip.
        limit: Step records to return at most.
    """
    return list(session.scalars(select(RunStep).where(RunStep.run_id == run_id)
                                .order_by(RunStep.step).offset(offset).limit(limit)))


def get_run(*, session: Session, run_id: int) -> Run:
    """Return one run.

    Raises:
        NotFound: No run has that id.
    """
    row = session.get(Run, run_id)
    if row is None:
        raise NotFound("run", run_id)
    return row


def count_steps(*, session: Session, run_ids: list[int]) -> dict[int, int]:
    """Stored step records per run id (runs without steps are absent)."""
    if not run_ids:
        return {}
    rows = session.execute(select(RunStep.run_id, func.count()).where(RunStep.run_id.in_(run_ids))
                           .group_by(RunStep.run_id))
    return {run_id: int(n) for run_id, n in rows}
