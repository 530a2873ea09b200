"""Artifacts: raw files kept for runs, gates and allocations (path, size, SHA-256)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from orchestrator.db.base import utcnow
from orchestrator.db.models import Artifact
from orchestrator.domain.errors import NotFound

__all__ = ["add_artifact", "claim_imported_log", "get_artifact", "get_imported_log"]

IMPORTED_LOG = "imported_log"
"""Artifact kind of an imported log; its ``sha256`` is unique among them (migration 0005)."""


def add_artifact(
    *,
    session: Session,
    path: str,
    size_bytes: int,
    sha256: str,
    kind: str = "log",
    run_id: int | None = None,
    gate_id: int | None = None,
    allocation_id: int | None = None,
) -> Artifact:
    """Record an artifact; idempotent on (run, gate, allocation, kind, sha256).

    Returns:
        The existing or new, flushed :class:`Artifact`.
    """
    existing = session.scalars(
        select(Artifact).where(
            Artifact.run_id.is_(run_id) if run_id is None else Artifact.run_id == run_id,
            Artifact.gate_id.is_(gate_id) if gate_id is None else Artifact.gate_id == gate_id,
            Artifact.allocation_id.is_(allocation_id)
            if allocation_id is None
            else Artifact.allocation_id == allocation_id,
            Artifact.kind == kind,
            Artifact.sha256 == sha256,
        )
    ).first()
    if existing is not None:
        return existing
    row = Artifact(
        path=path,
        size_bytes=size_bytes,
        sha256=sha256,
        kind=kind,
        run_id=run_id,
        gate_id=gate_id,
        allocation_id=allocation_id,
    )
    session.add(row)
    session.flush()
    return row


def get_artifact(*, session: Session, artifact_id: int) -> Artifact:
    """Return one artifact.

    Raises:
        NotFound: No artifact has that id.
    """
    row = session.get(Artifact, artifact_id)
    if row is None:
        raise NotFound("artifact", artifact_id)
    return row


def claim_imported_log(*, session: Session, sha256: str, path: str, size_bytes: int) -> Artifact | None:
    """Insert the artifact row of a log being imported, unless that log has one already.

    ``INSERT ... ON CONFLICT DO NOTHING`` on the unique index of imported logs' hashes:
    of any number of concurrent imports of the same bytes exactly one gets the row (the
    others wait for its transaction and get ``None``). Make it the transaction's first
    statement: on SQLite a write first takes the write lock, where a read first could
    not upgrade.

    Returns:
        The new, flushed :class:`Artifact` (``run_id``/``allocation_id`` to be set), or
        ``None`` when this log was imported already.
    """
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    stmt = (insert(Artifact.__table__)
            .values(path=path, size_bytes=size_bytes, sha256=sha256, kind=IMPORTED_LOG,
                    created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["sha256"],
                                    index_where=Artifact.__table__.c.kind == IMPORTED_LOG)
            .returning(Artifact.__table__.c.id))
    new_id = session.execute(stmt).scalar()
    return None if new_id is None else session.get(Artifact, new_id)


def get_imported_log(*, session: Session, sha256: str) -> Artifact | None:
    """The artifact row of an imported log with this SHA-256, if any."""
    return session.scalars(
        select(Artifact).where(Artifact.sha256 == sha256, Artifact.kind == IMPORTED_LOG)
    ).first()
