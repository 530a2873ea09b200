"""``/allocations``: one allocation and its health report."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from orchestrator.app.api.deps import ReadAccessDep, SessionDep
from orchestrator.schemas.views import AllocationPublic
from orchestrator.usecases import views

__all__ = ["router"]

router = APIRouter(prefix="/allocations", tags=["allocations"])


@router.get("/{allocation_id}", response_model=AllocationPublic)
def get_allocation(
    allocation_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    session: SessionDep,
    _read: ReadAccessDep,
) -> AllocationPublic:
    """An allocation: hosts, GPUs, clocks, power, versions, health checks and verdict."""
    return views.get_allocation_view(session=session, allocation_id=allocation_id)
