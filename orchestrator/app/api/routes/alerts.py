"""Alerts of the re-gate scheduler across tracked repositories."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from orchestrator.app.api.deps import AdminTokenDep, ReadAccessDep, SessionDep
from orchestrator.schemas.alerts import AlertPublic, AlertsPublic
from orchestrator.usecases.regate import alerts

router = APIRouter(prefix="/alerts", tags=["alerts"])


@router.get("", response_model=AlertsPublic)
def list_alerts(session: SessionDep, _read: ReadAccessDep,
                include_acknowledged: Annotated[bool, Query()] = False,
                limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> AlertsPublic:
    """Alerts of every tracked repository, newest first (open ones unless
    ``include_acknowledged``)."""
    return alerts.list_alerts(session=session, include_acknowledged=include_acknowledged,
                              limit=limit)


@router.post("/{event_id}/acknowledge", response_model=AlertPublic)
def acknowledge(event_id: Annotated[int, Path(ge=1, le=2**63 - 1)], session: SessionDep,
                token: AdminTokenDep) -> AlertPublic:
    """Mark an alert as seen, under the token's name (idempotent); needs the ``admin``
    scope."""
    out = alerts.acknowledge_alert(session=session, event_id=event_id, acknowledged_by=token.name)
    session.commit()
    return out
