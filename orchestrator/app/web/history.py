"""The history page: gates of one family / recipe / topology across allocations (uPlot)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from orchestrator.app.api.deps import ReadAccessDep, SessionDep
from orchestrator.app.web.pages import templates
from orchestrator.domain.errors import ValidationFailed
from orchestrator.usecases.history import DEFAULT_HISTORY_LIMIT, gate_history

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

Text = Annotated[str | None, Query(max_length=255, pattern=r"^[^\x00]*$")]


@router.get("/ledger/history", response_class=HTMLResponse)
def history_page(request: Request, session: SessionDep, _read: ReadAccessDep,
                 family: Text = None, recipe: Text = None, topology: Text = None,
                 tolerance_pct: Annotated[float, Query(gt=0, le=100)] = 0.5,
                 limit: Annotated[int, Query(ge=1, le=100_000)] = DEFAULT_HISTORY_LIMIT,
                 ) -> HTMLResponse:
    """Control midpoints (with the control band), candidate medians, the tolerance band and
    change points of the newest ``limit`` gates, one line per control identity; a point
    opens its gate."""
    try:
        hist = gate_history(session=session, family=family or None, recipe=recipe or None,
                            topology=topology or None, tolerance_pct=tolerance_pct, limit=limit)
    except ValidationFailed as exc:
        return templates.TemplateResponse(request, "not_found.html", {"message": str(exc)},
                                          status_code=422)
    data = {
        "tolerance_pct": hist.tolerance_pct,
        "change_points": hist.change_points,
        "groups": [{"label": g.label, "num_gates": len(g.gate_ids),
                    "change_point_gate_ids": g.change_point_gate_ids} for g in hist.groups],
        "points": [{"gate_id": p.gate_id, "t": p.created_at.timestamp(), "verdict": p.verdict,
                    "group": p.group, "title": p.title,
                    "midpoint_s": p.midpoint_s, "candidate_s": p.candidate_s,
                    "control_min_s": p.control_min_s, "control_max_s": p.control_max_s}
                   for p in hist.points],
    }
    return templates.TemplateResponse(request, "history.html", {"h": hist, "data": data})
