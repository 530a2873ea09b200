"""Ledger pages. They call the read-side use cases (:mod:`orchestrator.usecases.views`), never the
app's own HTTP API; writes (the decision form) go through the API with a token.
"""

from __future__ import annotations

import math
from pathlib import Path as FsPath
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from orchestrator.app.api.deps import ReadAccessDep, SessionDep, SettingsDep
from orchestrator.app.web.delta_plot import delta_svg
from orchestrator.app.web.headline import copy_deltas, decision_band, gate_headline
from orchestrator.app.web.plot import PlotRun, step_time_svg
from orchestrator.domain.errors import NotFound
from orchestrator.schemas.live import GateLivePublic
from orchestrator.schemas.views import GateFilters, GateViewPublic
from orchestrator.usecases import views
from orchestrator.usecases.live import gate_live
from orchestrator.usecases.verdict_briefs import disagreement_text

__all__ = ["router"]

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=FsPath(__file__).parent / "templates")


def _fmt(value: Any, spec: str, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{format(value, spec)}{suffix}"


templates.env.filters["ms"] = lambda s: _fmt(None if s is None else s * 1000.0, ".3f", " ms")
templates.env.filters["pct"] = lambda v: _fmt(v, "+.3f", " %")
templates.env.filters["upct"] = lambda v: _fmt(v, ".3f", " %")
templates.env.filters["pts"] = lambda v: _fmt(v, "+.2f")
templates.env.filters["dms"] = lambda v: _fmt(v, "+.3f", " ms")
templates.env.filters["num"] = lambda v, spec=".3f": _fmt(v, spec)
templates.env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M") if t else "-"


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "unknown until the first step time"
    if seconds <= 0:
        return "done"
    minutes, sec = divmod(int(round(seconds)), 60)
    return f"{minutes} min {sec:02d} s" if minutes else f"{sec} s"


templates.env.filters["eta"] = _eta
LIVE_POLL_SECONDS = 2
"""How often an unfinished gate's page asks for its progress."""


def step_plot_data(live: GateLivePublic, band_pct: float | None = None) -> dict[str, Any]:
    """The per-step plot's data (``static/plots.js``) from a gate's live progress.

    Args:
        live: The gate's live progress.
        band_pct: Half-width of the decision band drawn around the control midpoint,
            percent (:func:`orchestrator.app.web.headline.decision_band`); None: the primary
            verdict's ``threshold_pct``.
    """
    return {
        "runs": [{"label": r.label, "role": r.role or "?", "steps_s": r.steps_s,
                  "num_warmup_steps": r.num_warmup_steps, "median_s": r.median_step_s}
                 for r in live.runs],
        "midpoint_s": live.midpoint_s,
        "threshold_pct": band_pct if band_pct is not None else live.threshold_pct,
    }


def _history_url(view: GateViewPublic) -> tuple[str | None, str]:
    s = view.summary
    if s.family:
        return f"/ledger/history?family={quote(s.family)}", "family"
    return (f"/ledger/history?recipe={quote(s.recipe)}"
            + (f"&topology={quote(s.topology)}" if s.topology else ""), "recipe and topology")


def _plot(view: GateViewPublic) -> Markup:
    runs = [
        PlotRun(
            label=f"{r.role or '?'}{r.order}",
            role=r.role or "?",
            step_s=tuple(r.slowest_rank_step_s),
            num_warmup_steps=r.num_warmup_steps
            if r.num_warmup_steps is not None
            else view.gate.num_warmup_steps,
            median_s=r.median_step_s,
        )
        for r in view.runs
    ]
    return Markup(step_time_svg(runs, title=f"gate {view.gate.id}: slowest-rank step times"))


def _delta_plot(view: GateViewPublic) -> tuple[Markup, Any]:
    """The delta plot of the candidate copies and the primary policy's decision band."""
    primary = next((v for v in view.gate.verdicts if v.is_primary), None)
    numbers = dict(primary.numbers or {}) if primary is not None else {}
    band = decision_band(primary.policy if primary is not None else None, numbers)
    brief = next((b for b in view.summary.verdicts if b.is_primary), None)
    svg = delta_svg(copy_deltas(numbers), band, estimate_pct=view.summary.delta_pct,
                    estimate_low_pct=brief.ci_low_pct if brief else None,
                    estimate_high_pct=brief.ci_high_pct if brief else None,
                    estimate_label=f"gate ({primary.policy})" if primary is not None else "gate",
                    title=f"gate {view.gate.id}: delta of each candidate copy vs control midpoint")
    return Markup(svg), band


@router.get("/", response_class=RedirectResponse)
def root() -> RedirectResponse:
    """Send browsers to the ledger."""
    return RedirectResponse("/ledger", status_code=307)


@router.get("/ledger", response_class=HTMLResponse)
def ledger_page(
    request: Request,
    session: SessionDep,
    _read: ReadAccessDep,
    filters: Annotated[GateFilters, Query()],
) -> HTMLResponse:
    """Every gate newest first, with the stopping-point table on top."""
    page = views.list_gates(session=session, filters=filters)
    points = views.stopping_points(session=session)
    qs = filters.query_string_without_paging()
    return templates.TemplateResponse(
        request,
        "ledger.html",
        {
            "page": page,
            "points": points.data,
            "filters": filters,
            "qs": qs,
            "prev_skip": max(filters.skip - filters.limit, 0) if filters.skip > 0 else None,
            "next_skip": filters.skip + filters.limit
            if filters.skip + filters.limit < page.count
            else None,
        },
    )


@router.get("/ledger/decisions", response_class=HTMLResponse)
def decisions_page(request: Request, session: SessionDep, _read: ReadAccessDep) -> HTMLResponse:
    """Gates grouped by family and tag with their effective decisions."""
    groups = views.decision_index(session=session)
    return templates.TemplateResponse(request, "decisions.html", {"groups": groups})


@router.get("/ledger/gates/{gate_id}", response_class=HTMLResponse)
def gate_page(
    request: Request,
    gate_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    session: SessionDep,
    settings: SettingsDep,
    _read: ReadAccessDep,
) -> HTMLResponse:
    """One gate: plot, numbers, health report, provenance, artifacts, decisions."""
    try:
        view = views.get_gate_view(session=session, gate_id=gate_id)
    except NotFound as exc:
        return templates.TemplateResponse(
            request, "not_found.html", {"message": str(exc)}, status_code=404
        )
    verdicts = view.gate.verdicts
    primary = next((v for v in verdicts if v.is_primary), None)
    live = gate_live(session=session, gate_id=gate_id, data_dir=settings.data_dir)
    history_url, history_label = _history_url(view)
    delta_plot, band = _delta_plot(view)
    return templates.TemplateResponse(
        request,
        "gate.html",
        {
            "v": view,
            "g": view.gate,
            "s": view.summary,
            "primary": primary,
            "plot": _plot(view),
            "head": gate_headline(view),
            "disagreement": disagreement_text(view.gate.verdicts),
            "delta_plot": delta_plot,
            "band": band,
            "step_data": step_plot_data(live, band_pct=band.high_pct),
            "live": {**live.model_dump(), "poll_seconds": LIVE_POLL_SECONDS,
                     "runs": live.runs},
            "history_url": history_url,
            "history_label": history_label,
        },
    )


@router.get("/ledger/gates/{gate_id}/live")
def gate_live_json(
    gate_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    session: SessionDep,
    settings: SettingsDep,
    _read: ReadAccessDep,
) -> JSONResponse:
    """The gate page's live progress: status, per-run steps, ETA and the plot's data."""
    try:
        live = gate_live(session=session, gate_id=gate_id, data_dir=settings.data_dir)
    except NotFound as exc:
        return JSONResponse({"detail": [{"loc": ["path", "gate_id"], "msg": str(exc),
                                         "type": "not_found"}]}, status_code=404)
    out = live.model_dump(mode="json", exclude={"runs": {"__all__": {"steps_s"}}})
    out["plot"] = step_plot_data(live)
    out["eta_text"] = _eta(live.eta_s)
    for run, item in zip(live.runs, out["runs"]):
        item["eta_text"] = _eta(run.eta_s)
    out["poll_seconds"] = LIVE_POLL_SECONDS
    return JSONResponse(out)
