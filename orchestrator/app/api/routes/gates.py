"""``/gates``: submit, list, show, cancel, decide."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query, Response, status
from sqlalchemy.exc import PendingRollbackError

from orchestrator.app.api.deps import (
    DecideTokenDep,
    ReadAccessDep,
    SessionDep,
    SettingsDep,
    SubmitTokenDep,
)
from orchestrator.app.api.validation import ensure_server_executor, ensure_storable
from orchestrator.domain.errors import Conflict, ValidationFailed
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
    response_model=GateViewPublic,
    responses={200: {"model": GateViewPublic, "description": "Idempotent repeat: the first gate."}},
)
def submit_gate(
    gate_in: GateCreate,
    session: SessionDep,
    settings: SettingsDep,
    _token: SubmitTokenDep,
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
) -> GateViewPublic:
    """Validate a gate request and queue it (201); an idempotent repeat answers 200. The
    answer has the shape of ``GET /gates/{id}``.

    ``executor: debug`` is refused (422): it runs the gate inside the submitting process,
    which only the embedded CLI is. Recipe and criteria files must be shipped names or
    files under ``security.files_dir``; ``secret://NAME`` env values must name a variable
    of ``security.secret_refs``.
    """
    ensure_storable(gate_in.model_dump(mode="json"))
    ensure_server_executor(gate_in.executor, settings.executor.kind, "executor")
    try:
        gate, created = _submit(session, gate_in, settings, idempotency_key)
    except (Conflict, PendingRollbackError):
        if idempotency_key is None:
            raise
        # A concurrent duplicate won the insert. On SQLite the use case's savepoint cannot
        # recover the transaction (pysqlite SAVEPOINT semantics), so start over: the
        # repeat finds the committed gate by its key.
        session.rollback()
        gate, created = _submit(session, gate_in, settings, idempotency_key)
    if not created:
        response.status_code = status.HTTP_200_OK
    return views.get_gate_view(session=session, gate_id=gate.id)


def _submit(session, gate_in: GateCreate, settings, key: str | None) -> tuple[GatePublic, bool]:
    gate, created = gates.submit_gate(
        session=session, gate_in=gate_in, default_executor=settings.executor.kind,
        idempotency_key=key, files=gates.FilePolicy.restricted_to(settings.security.files_dir),
        secret_refs=settings.security.secret_refs,
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
    """One gate: its fields, runs with their measured numbers, verdicts with all numbers,
    health report, provenance, artifact hashes, decision history and earlier gates of its
    family (the same shape as ``POST /gates`` answers)."""
    return views.get_gate_view(session=session, gate_id=gate_id)


@router.post("/{gate_id}/cancel", response_model=GateViewPublic)
def cancel_gate(
    gate_id: GateId,
    session: SessionDep,
    _token: SubmitTokenDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> GateViewPublic:
    """Cancel a queued or running gate (409 once it has finished); answers the gate in
    the shape of ``GET /gates/{id}``."""
    reason = body.reason if body is not None else "cancelled by user"
    gates.cancel_gate(session=session, gate_id=gate_id, reason=reason)
    session.commit()
    return views.get_gate_view(session=session, gate_id=gate_id)


@router.post(
    "/{gate_id}/decisions", status_code=status.HTTP_201_CREATED, response_model=DecisionPublic
)
def record_decision(
    gate_id: GateId, body: DecisionCreate, session: SessionDep, token: DecideTokenDep
) -> DecisionPublic:
    """Append a human decision (append-only history; the newest supersedes). A decision
    that differs from the timing verdict needs a reason. It is recorded under the token's
    name (``decided_by``) and id; ``note`` carries any other text."""
    if body.decided_by is not None and body.decided_by != token.name:
        raise ValidationFailed(
            "decided_by", f"decisions are recorded under the token's name ({token.name!r}) and "
                          "cannot name someone else; put other text in 'note'")
    row = gates.record_decision(
        session=session,
        gate_id=gate_id,
        decided_by=token.name,
        decision=body.decision,
        reason=body.reason,
        note=body.note,
        token_id=token.id,
    )
    out = DecisionPublic.model_validate(row)
    session.commit()
    return out
