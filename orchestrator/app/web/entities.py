"""HTML pages of runs, allocations, imported runs and alerts (the links of the ledger open
these, not raw JSON; the JSON stays at ``/runs/{id}``, ``/allocations/{id}``, ``/alerts``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse

from orchestrator.app.api.deps import ReadAccessDep, SessionDep, SettingsDep
from orchestrator.app.web.pages import templates
from orchestrator.domain.errors import NotFound
from orchestrator.usecases import views
from orchestrator.usecases.regate.alerts import list_alerts
from orchestrator.usecases.run_pages import list_imported_runs, run_log_tail

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

Id = Annotated[int, Path(ge=1, le=2**63 - 1)]


def _not_found(request: Request, exc: NotFound) -> HTMLResponse:
    return templates.TemplateResponse(request, "not_found.html", {"message": str(exc)},
                                      status_code=404)


@router.get("/ledger/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: Id, session: SessionDep, settings: SettingsDep,
             _read: ReadAccessDep) -> HTMLResponse:
    """One run: numbers, the real error and the end of its log, per-step plot, provenance."""
    try:
        run = views.get_run_view(session=session, run_id=run_id, steps_limit=0)
    except NotFound as exc:
        return _not_found(request, exc)
    tail = run_log_tail(session=session, run_id=run_id, artifacts_dir=settings.artifacts_dir,
                        data_dir=settings.data_dir)
    full = views.get_run_view(session=session, run_id=run_id, steps_limit=20_000)
    step_data = {"runs": [{"label": f"{run.role or '?'}{run.order}", "role": run.role or "?",
                           "steps_s": full.slowest_rank_step_s,
                           "num_warmup_steps": run.num_warmup_steps or 0,
                           "median_s": run.median_step_s}],
                 "midpoint_s": None, "threshold_pct": None}
    return templates.TemplateResponse(request, "run.html", {"r": run, "log_tail": tail,
                                                            "step_data": step_data})


@router.get("/ledger/allocations/{allocation_id}", response_class=HTMLResponse)
def allocation_page(request: Request, allocation_id: Id, session: SessionDep,
                    _read: ReadAccessDep) -> HTMLResponse:
    """One allocation: facts, health verdict and every health check."""
    try:
        alloc = views.get_allocation_view(session=session, allocation_id=allocation_id)
    except NotFound as exc:
        return _not_found(request, exc)
    return templates.TemplateResponse(request, "allocation.html", {"a": alloc})


@router.get("/ledger/imports", response_class=HTMLResponse)
def imports_page(request: Request, session: SessionDep, _read: ReadAccessDep) -> HTMLResponse:
    """Runs imported from logs, newest first."""
    runs = list_imported_runs(session=session)
    return templates.TemplateResponse(request, "imports.html", {"runs": runs})


@router.get("/ledger/alerts", response_class=HTMLResponse)
def alerts_page(request: Request, session: SessionDep, _read: ReadAccessDep,
                include_acknowledged: Annotated[bool, Query()] = False) -> HTMLResponse:
    """Alerts of every tracked repository with an acknowledge button."""
    alerts = list_alerts(session=session, include_acknowledged=include_acknowledged)
    return templates.TemplateResponse(request, "alerts.html",
                                      {"alerts": alerts, "include_acknowledged": include_acknowledged})
