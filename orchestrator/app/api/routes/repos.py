"""``/repos``: tracked repositories of the nightly re-gate, their drift and a manual check."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status

from orchestrator.app.api.deps import (
    AdminTokenDep,
    ReadAccessDep,
    SessionDep,
    SettingsDep,
    SubmitTokenDep,
)
from orchestrator.app.api.validation import ensure_server_executor
from orchestrator.schemas.repos import (
    CheckResultPublic,
    DriftPublic,
    RepoCreate,
    RepoCreatedPublic,
    RepoPublic,
    ReposPublic,
    RepoUpdate,
    RepoViewPublic,
)
from orchestrator.usecases import regate
from orchestrator.usecases.drift import drift_of_repository
from orchestrator.usecases.gate_files import FilePolicy

__all__ = ["router"]

router = APIRouter(prefix="/repos", tags=["repos"])

RepoId = Annotated[int, Path(ge=1, le=2**63 - 1, description="Tracked repository id.")]


def _guards(settings) -> dict:
    security = settings.security
    return {"files": FilePolicy.restricted_to(security.files_dir), "secret_refs": security.secret_refs,
            "allow_private_webhooks": security.webhook_allow_private}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=RepoCreatedPublic)
def add_repo(repo_in: RepoCreate, session: SessionDep, settings: SettingsDep,
             _token: AdminTokenDep) -> RepoCreatedPublic:
    """Track a branch (422 when the repository or branch cannot be read, a webhook target
    is on a private address or the executor is ``debug``; 409 when the pair is tracked
    already). The first check adopts the head as the measured head. The answer holds the
    repository's webhook signing secret, shown this once."""
    ensure_server_executor(repo_in.executor, settings.executor.kind, "executor")
    out = regate.add_repository(session=session, repo_in=repo_in, default_executor=settings.executor.kind,
                                **_guards(settings))
    session.commit()
    return out


@router.get("", response_model=ReposPublic)
def list_repos(session: SessionDep, _read: ReadAccessDep) -> ReposPublic:
    """Every tracked repository."""
    return regate.list_repositories(session=session)


@router.get("/{repo_id}", response_model=RepoViewPublic)
def get_repo(repo_id: RepoId, session: SessionDep, _read: ReadAccessDep) -> RepoViewPublic:
    """One repository with its recent events (flags and alerts), bisections (first bad
    commit with delta and drift) and webhook deliveries with every attempt."""
    return regate.get_repository_view(session=session, repo_id=repo_id)


@router.patch("/{repo_id}", response_model=RepoPublic)
def update_repo(repo_id: RepoId, repo_in: RepoUpdate, session: SessionDep, settings: SettingsDep,
                _token: AdminTokenDep) -> RepoPublic:
    """Change fields of a tracked repository; ``last_measured_sha`` accepts a new baseline."""
    if repo_in.executor == "debug":
        ensure_server_executor(repo_in.executor, settings.executor.kind, "executor")
    out = regate.update_repository(session=session, repo_id=repo_id, repo_in=repo_in,
                                   mirrors_dir=settings.data_dir / "mirrors", **_guards(settings))
    session.commit()
    return out


@router.delete("/{repo_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response)
def delete_repo(repo_id: RepoId, session: SessionDep, _token: AdminTokenDep) -> Response:
    """Stop tracking a repository (its gates stay in the ledger)."""
    regate.remove_repository(session=session, repo_id=repo_id)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{repo_id}/drift", response_model=DriftPublic)
def repo_drift(repo_id: RepoId, session: SessionDep, _read: ReadAccessDep) -> DriftPublic:
    """Measured-head medians over time with change points (ruptures PELT; the penalty
    is described in ``method``) and the slow-drift flag."""
    return drift_of_repository(session=session, repo_id=repo_id)


@router.post("/{repo_id}/check", response_model=CheckResultPublic)
def check_repo(repo_id: RepoId, session: SessionDep, settings: SettingsDep,
               _token: SubmitTokenDep, request: Request) -> CheckResultPublic:
    """Check the branch now (what one scheduled check does): submit a re-gate when the
    head moved since the measured head. Links in the notifications it sends are absolute:
    ``nightly.public_url``, else this request's base URL."""
    settings = settings.with_public_url(str(request.base_url))
    out = regate.check_repository(session=session, repo_id=repo_id, settings=settings)
    session.commit()
    return out


@router.post("/{repo_id}/webhook-secret", response_model=RepoCreatedPublic)
def rotate_webhook_secret(repo_id: RepoId, session: SessionDep,
                          _token: AdminTokenDep) -> RepoCreatedPublic:
    """Replace the repository's webhook signing secret; the answer shows the new one once
    (deliveries from now on are signed with it)."""
    out = regate.rotate_webhook_secret(session=session, repo_id=repo_id)
    session.commit()
    return out
