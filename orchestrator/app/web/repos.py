"""Pages of tracked repositories: list, and one branch with events, bisections and drift."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from orchestrator.app.api.deps import ReadAccessDep, SessionDep, SettingsDep
from orchestrator.app.web.drift_plot import drift_svg
from orchestrator.app.web.pages import templates
from orchestrator.domain.errors import NotFound
from orchestrator.usecases import regate
from orchestrator.usecases.drift import drift_of_repository

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.get("/ledger/repos", response_class=HTMLResponse)
def repos_page(request: Request, session: SessionDep, _read: ReadAccessDep) -> HTMLResponse:
    """Tracked repositories with their measured heads."""
    repos = regate.list_repositories(session=session)
    return templates.TemplateResponse(request, "repos.html", {"repos": repos.data})


@router.get("/ledger/repos/{repo_id}", response_class=HTMLResponse)
def repo_page(request: Request, repo_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
              session: SessionDep, settings: SettingsDep, _read: ReadAccessDep) -> HTMLResponse:
    """One tracked branch: drift plot with change points, bisections, events, webhooks."""
    try:
        view = regate.get_repository_view(session=session, repo_id=repo_id,
                                          mirrors_dir=settings.data_dir / "mirrors")
    except NotFound as exc:
        return templates.TemplateResponse(request, "not_found.html", {"message": str(exc)}, status_code=404)
    drift = drift_of_repository(session=session, repo_id=repo_id)
    plot = drift_svg(
        [p.median_s for p in drift.points],
        [f"gate {p.gate_id} {p.sha[:10]} {p.verdict or ''}" for p in drift.points],
        [(s.start, s.end, s.mean_s) for s in drift.segments],
        drift.change_points,
        title=f"{view.repo.branch}: measured-head medians",
    )
    data = {
        "tolerance_pct": view.repo.tolerance_pct,
        "change_points": drift.change_points,
        "segments": [{"start": s.start, "end": s.end, "mean_s": s.mean_s} for s in drift.segments],
        "points": [{"gate_id": p.gate_id, "t": p.created_at.timestamp(), "median_s": p.median_s,
                    "adopted": p.adopted, "verdict": p.verdict, "sha": p.sha} for p in drift.points],
    }
    return templates.TemplateResponse(request, "repo.html", {"v": view, "r": view.repo, "drift": drift,
                                                             "plot": Markup(plot), "drift_data": data,
                                                             "subjects": view.commit_subjects})
