"""``/gates``: submit, list, show, cancel, decide."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query, Response, status
from sqlalchemy.exc import PendingRollbackError

from orchestrator.app.api.deps import ReadAccessDep, SessionDep, SettingsDep, WriteTokenDep
from orchestrator.app.api.validation import ensure_storable
from orchestrator.domain.errors import Conflict
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.schemas.gates import GatePublic
from orchestrator.schemas.views import (
    CancelRequest,
    DecisionCreate,
    DecisionPublic,
    GateFilters,
    GateSummariesPublic,
    GateViewPublic,
)
from orchestrator.usecases import gates, views

__all__ = ["router"]

router = APIRouter(prefix="/gates", tags=["gates"])

GateId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Gate id.")]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=GatePublic,
    responses={200: {"model": GatePublic, "description": "Idempotent repeat: the first gate."}},
)
def submit_gate(
    gate_in: GateCreate,
    session: SessionDep,
    settings: SettingsDep,
    _token: WriteTokenDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=255,
            pattern=r"^[\x21-\x7e]+$",
            description="A repeat with the same key returns the first gate (200).",
        ),
    ] = None,
) -> GatePublic:
    """Validate a gate request and queue it (201); an idempotent repeat answers 200."""
    ensure_storable(gate_in.model_dump(mode="json"))
    try:
        gate, created = _submit(session, gate_in, settings.executor.kind, idempotency_key)
    except (Conflict, PendingRollbackError):
        if idempotency_key is None:
            raise
        # A concurrent duplicate won the insert. On SQLite the use case's savepoint cannot
        # recover the transaction (pysqlite SAVEPOINT semantics), so start over: the
        # repeat finds the committed gate by its key.
        session.rollback()
        gate, created = _submit(session, gate_in, settings.executor.kind, idempotency_key)
    if not created:
        response.status_code = status.HTTP_200_OK
    return gate


def _submit(session, gate_in: GateCreate, executor: str, key: str | None) -> tuple[GatePublic, bool]:
    gate, created = gates.submit_gate(
        session=session, gate_in=gate_in, default_executor=executor, idempotency_key=key
    )
    session.commit()
    return gate, created


@router.get("", response_model=GateSummariesPublic)
def list_gates(
    session: SessionDep, _read: ReadAccessDep, filters: Annotated[GateFilters, Query()]
) -> GateSummariesPublic:
    """The decision ledger, newest first, filtered and paginated."""
    return views.list_gates(session=session, filters=filters)


@router.get("/{gate_id}", response_model=GateViewPublic)
def get_gate(gate_id: GateId, session: SessionDep, _read: ReadAccessDep) -> GateViewPublic:
    """One gate: runs with per-step slowest-rank times, verdicts with all numbers, health
    report, provenance, artifact hashes, decision history and earlier gates of its family."""
    return views.get_gate_view(session=session, gate_id=gate_id)


@router.post("/{gate_id}/cancel", response_model=GatePublic)
def cancel_gate(
    gate_id: GateId,
    session: SessionDep,
    _token: WriteTokenDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> GatePublic:
    """Cancel a queued or running gate (409 once it has finished)."""
    reason = body.reason if body is not None else "cancelled by user"
    gates.cancel_gate(session=session, gate_id=gate_id, reason=reason)
    session.commit()
    return gates.get_gate(session=session, gate_id=gate_id)


@router.post(
    "/{gate_id}/decisions", status_code=status.HTTP_201_CREATED, response_model=DecisionPublic
)
def record_decision(
    gate_id: GateId, body: DecisionCreate, session: SessionDep, token: WriteTokenDep
) -> DecisionPublic:
    """Append a human decision (append-only history; the newest supersedes). A decision
    that differs from the timing verdict needs a reason."""
    row = gates.record_decision(
        session=session,
        gate_id=gate_id,
        decided_by=body.decided_by or token.name,
        decision=body.decision,
        reason=body.reason,
    )
    out = DecisionPublic.model_validate(row)
    session.commit()
    return out
