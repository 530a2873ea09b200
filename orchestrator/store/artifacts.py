"""Artifacts: raw files kept for runs, gates and allocations (path, size, SHA-256)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import Artifact
from orchestrator.domain.errors import NotFound

__all__ = ["add_artifact", "get_artifact"]


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
