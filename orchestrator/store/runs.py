"""Runs and their per-step records."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Run, RunStep
from orchestrator.domain.errors import NotFound

__all__ = ["add_step_rows", "add_steps", "count_steps", "create_run", "get_run", "imported_runs",
           "list_steps", "update_run"]

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


_COLUMNS = "run_id, step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase"
_SQLITE_INSERT = (f"INSERT INTO run_steps ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                  "ON CONFLICT (run_id, step) DO NOTHING")
_PG_STAGE = ("CREATE TEMP TABLE IF NOT EXISTS axbgate_step_stage (run_id bigint, step bigint, "
             "slowest_rank_step_s double precision, rank_step_s double precision, "
             "loss double precision, grad_norm double precision, phase varchar(16)) "
             "ON COMMIT DELETE ROWS")
_PG_TYPES = ("bigint", "bigint", "double precision", "double precision", "double precision",
             "double precision", "character varying")
"""Column types of ``run_steps`` (migration 0001) for binary COPY: the server skips
parsing a million floats from text."""
_PG_MOVE = (f"INSERT INTO run_steps ({_COLUMNS}) SELECT {_COLUMNS} FROM axbgate_step_stage "
            "ON CONFLICT (run_id, step) DO NOTHING")


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) is float:
        return value if -math.inf < value < math.inf else None
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _write(session: Session, rows: list[tuple], new_steps: bool = False) -> None:
    """One chunk: SQLite executemany; PostgreSQL COPY (tens of times faster than
    row-by-row inserts for a million steps): straight into ``run_steps`` when the steps
    are known to be new, else into a session-local stage table, then one
    ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``."""
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        conn.exec_driver_sql(_SQLITE_INSERT, rows)
        return
    if new_steps:
        with conn.connection.dbapi_connection.cursor() as cur:
            with cur.copy(f"COPY run_steps ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(_PG_TYPES)
                for row in rows:
                    copy.write_row(row)
        return
    conn.exec_driver_sql(_PG_STAGE)
    with conn.connection.dbapi_connection.cursor() as cur:
        with cur.copy(f"COPY axbgate_step_stage ({_COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cur.execute(_PG_MOVE)
        cur.execute("DELETE FROM axbgate_step_stage")


def add_steps(*, session: Session, run: Run, steps: Iterable[dict[str, Any]]) -> int:
    """Store per-step records; idempotent on (run, step): a step already stored is skipped.

    Written in chunks of :data:`_STEP_CHUNK` rows as the iterable is consumed (a million
    steps never sit in memory at once) with ``ON CONFLICT (run_id, step) DO NOTHING``, so
    a repeated or concurrent ingest of the same steps never fails on the constraint. A
    non-finite time, loss or gradient norm is stored as NULL (the run's error names it).

    Args:
        session: Open session.
        run: The run.
        steps: Dicts with ``step`` and optional ``slowest_rank_step_s``, ``rank_step_s``,
            ``loss``, ``grad_norm``, ``phase``.

    Returns:
        How many step records were offered (duplicates included).
    """
    session.flush()
    count = 0
    batch: list[tuple] = []
    for s in steps:
        batch.append((run.id, s["step"], _finite(s.get("slowest_rank_step_s")), _finite(s.get("rank_step_s")),
                      _finite(s.get("loss")), _finite(s.get("grad_norm")), s.get("phase")))
        if len(batch) >= _STEP_CHUNK:
            _write(session, batch)
            count += len(batch)
            batch = []
    if batch:
        _write(session, batch)
        count += len(batch)
    return count


def add_step_rows(*, session: Session, run: Run, rows: Iterable[tuple], new_steps: bool = False) -> int:
    """Like :func:`add_steps` for rows already in column order and checked (the importer):
    ``(step, slowest_rank_step_s, rank_step_s, loss, grad_norm, phase)`` with finite times
    or ``None``; a non-finite loss or gradient norm is stored as NULL.

    Args:
        session: Open session.
        run: The run.
        rows: The rows.
        new_steps: The caller guarantees no step of ``rows`` is stored for the run yet and
            none repeats (a run created in this transaction, steps strictly increasing);
            PostgreSQL then copies them straight into the table.

    Returns:
        How many rows were offered.
    """
    session.flush()
    count = 0
    batch: list[tuple] = []
    run_id = run.id
    inf = math.inf
    for step, slowest, rank, loss, grad_norm, phase in rows:
        batch.append((run_id, step, slowest, rank,
                      loss if loss is None or -inf < loss < inf else None,
                      grad_norm if grad_norm is None or -inf < grad_norm < inf else None, phase))
        if len(batch) >= _STEP_CHUNK:
            _write(session, batch, new_steps)
            count += len(batch)
            batch = []
    if batch:
        _write(session, batch, new_steps)
        count += len(batch)
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


def imported_runs(*, session: Session, limit: int = 200) -> list[Run]:
    """Runs imported from logs (no gate), newest first (per-step series not loaded)."""
    from sqlalchemy.orm import defer

    return list(session.scalars(select(Run).where(Run.gate_id.is_(None))
                                .options(defer(Run.slowest_rank_step_s))
                                .order_by(Run.id.desc()).limit(limit)))
