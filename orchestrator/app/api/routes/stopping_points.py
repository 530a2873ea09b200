"""``/stopping-points``: the best baseline-eligible accepted result per topology/recipe."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator.app.api.deps import ReadAccessDep, SessionDep
from orchestrator.schemas.views import StoppingPointsPublic
from orchestrator.usecases import views

__all__ = ["router"]

router = APIRouter(tags=["ledger"])


@router.get("/stopping-points", response_model=StoppingPointsPublic)
def get_stopping_points(session: SessionDep, _read: ReadAccessDep) -> StoppingPointsPublic:
    """Per topology and recipe, the accepted gate with the lowest candidate median among
    gates that succeeded on a healthy allocation (baseline-eligible)."""
    return views.stopping_points(session=session)
