"""``/verdicts/preview``: judge run medians without storing anything."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from orchestrator.app.api.deps import ReadAccessDep
from orchestrator.schemas.views import VerdictPreviewCreate
from orchestrator.usecases import views

__all__ = ["router"]

router = APIRouter(prefix="/verdicts", tags=["verdicts"])


@router.post("/preview")
def preview_verdict(body: VerdictPreviewCreate, _read: ReadAccessDep) -> dict[str, Any]:
    """The timing verdict of run medians (same engine as ``axbgate verdict``). Control MFU
    and throughput are evaluated at the control midpoint step time; MFU points are
    MFU(X) - MFU(midpoint) (DESIGN.md section 3). The route needs no token, so its body
    is bounded: over ``limits.max_body_bytes`` (1 MiB) it answers 413 unread."""
    return views.preview_verdict(body)
