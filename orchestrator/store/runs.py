"""Runs and their per-step records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from orchestrator.db.models import Run, RunStep
from orchestrator.domain.errors import NotFound

__all__ = ["add_steps", "count_steps", "create_run", "get_run", "update_run"]

_STEP_CHUNK = 2000
"""Rows per INSERT statement (SQLite allows 32,766 bound parameters; 7 per row)."""

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


def add_steps(*, session: Session, run: Run, steps: Iterable[dict[str, Any]]) -> int:
    """Store per-step records; idempotent on (run, step): a step already stored is skipped.

    Inserted with ``INSERT ... ON CONFLICT DO NOTHING`` in chunks, so a repeated or
    concurrent ingest of the same steps never fails on the (run, step) constraint and
    never reads the steps already stored.

    Args:
        session: Open session.
        run: The run.
        steps: Dicts with ``step``, ``slowest_rank_step_s`` and optional ``rank_step_s``,
            ``loss``, ``grad_norm``, ``phase``.

    Returns:
        How many step records were offered (duplicates included).
    """
    dialect = session.get_bind().dialect.name
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    rows = [{"run_id": run.id, "step": s["step"], "slowest_rank_step_s": s["slowest_rank_step_s"],
             "rank_step_s": s.get("rank_step_s"), "loss": s.get("loss"),
             "grad_norm": s.get("grad_norm"), "phase": s.get("phase")} for s in steps]
    for start in range(0, len(rows), _STEP_CHUNK):
        session.execute(insert(RunStep).values(rows[start:start + _STEP_CHUNK])
                        .on_conflict_do_nothing(index_elements=["run_id", "step"]))
    session.flush()
    return len(rows)


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
