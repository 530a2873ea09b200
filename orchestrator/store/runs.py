"""Runs and their per-step records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import Run, RunStep
from orchestrator.errors import NotFound

__all__ = ["add_steps", "create_run", "get_run", "update_run"]

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

    Args:
        session: Open session.
        run: The run.
        steps: Dicts with ``step``, ``slowest_rank_step_s`` and optional ``rank_step_s``,
            ``loss``, ``grad_norm``, ``phase``.

    Returns:
        How many new rows were inserted.
    """
    have = set(session.scalars(select(RunStep.step).where(RunStep.run_id == run.id)))
    new = []
    for s in steps:
        if s["step"] in have:
            continue
        have.add(s["step"])
        new.append(
            RunStep(
                run_id=run.id,
                step=s["step"],
                slowest_rank_step_s=s["slowest_rank_step_s"],
                rank_step_s=s.get("rank_step_s"),
                loss=s.get("loss"),
                grad_norm=s.get("grad_norm"),
                phase=s.get("phase"),
            )
        )
    session.add_all(new)
    session.flush()
    return len(new)


def get_run(*, session: Session, run_id: int) -> Run:
    """Return one run.

    Raises:
        NotFound: No run has that id.
    """
    row = session.get(Run, run_id)
    if row is None:
        raise NotFound("run", run_id)
    return row
