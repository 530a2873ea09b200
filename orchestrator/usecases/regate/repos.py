"""Use cases on tracked repositories: add, list, show, update, remove."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import TrackedRepository
from orchestrator.domain.errors import ValidationFailed
from orchestrator.schemas.repos import (
    BisectionPublic,
    RepoCreate,
    RepoCreatedPublic,
    RepoEventPublic,
    RepoPublic,
    ReposPublic,
    RepoUpdate,
    RepoViewPublic,
    WebhookDeliveryPublic,
)
from orchestrator.usecases.gate_files import FilePolicy
from orchestrator.usecases.notify import check_webhook_targets, new_webhook_secret
from orchestrator.usecases.regate.common import branch_head_or_422, validate_request
from orchestrator.vcs.history import GitError, commit_exists, commit_subjects

__all__ = ['add_repository', 'bisection_conflicts', 'get_repository', 'get_repository_view',
           'list_repositories',
           'remove_repository', 'rotate_webhook_secret', 'update_repository']

logger = logging.getLogger(__name__)


def add_repository(*, session: Session, repo_in: RepoCreate, default_executor: str = "local",
                   files: FilePolicy | None = None, secret_refs: list[str] | None = None,
                   allow_private_webhooks: bool = False) -> RepoCreatedPublic:
    """Track a branch: check that it exists and that its re-gate request validates.

    Args:
        session: Open session (the caller commits).
        repo_in: The validated request.
        default_executor: Executor when the request names none.
        files: Which recipe/criteria files may be named (default: any).
        secret_refs: Server variables ``secret://NAME`` may name (default: any).
        allow_private_webhooks: Accept webhook targets on private/loopback/link-local
            addresses (``security.webhook_allow_private``).

    Returns:
        The stored repository (no measured head yet; the first check sets it) with its
        webhook signing secret, shown this once.

    Raises:
        ValidationFailed: The repository or branch cannot be read (``url``/``branch``),
            the workload's recipe does not resolve, a path field, secret reference or
            webhook target is not allowed.
        Conflict: The (url, branch) pair is already tracked.
    """
    check_webhook_targets(repo_in.notify, allow_private=allow_private_webhooks)
    head = branch_head_or_422(repo_in.url, repo_in.branch)
    fields: dict[str, Any] = {
        "url": repo_in.url, "branch": repo_in.branch,
        "workload": repo_in.workload.model_dump(mode="json", exclude_none=True),
        "topology": repo_in.topology.model_dump(mode="json"),
        "executor": repo_in.executor or default_executor, "schedule": repo_in.schedule,
        "tolerance_pct": repo_in.tolerance_pct, "notify": list(repo_in.notify), "bisect": repo_in.bisect,
        "enabled": repo_in.enabled, "options": repo_in.options.model_dump(mode="json"),
    }
    probe = TrackedRepository(id=0, **fields)
    validate_request(probe, head, files, secret_refs)
    fields.update(workload=probe.workload, options=probe.options,
                  webhook_secret=new_webhook_secret())
    row = store.repos.create_repo(session=session, **fields)
    logger.info("repo=%s tracking %s branch %s (head %s)", row.id, row.url, row.branch, head[:12])
    return RepoCreatedPublic(**RepoPublic.model_validate(row).model_dump(),
                             webhook_secret=row.webhook_secret)


_CONCLUSIONS = {"baseline": "healthy", "pass": "healthy", "improvement": "healthy",
                "regression": "regression", "bisect_found": "regression", "bisect_failed": "regression",
                "no_verdict": "no_verdict", "check_failed": "failing"}
"""Event kinds that conclude a check or re-gate, and the repository health each sets."""


def repository_public(*, session: Session, repo) -> RepoPublic:
    """A repository with its ``health`` read from its newest concluding event."""
    out = RepoPublic.model_validate(repo)
    if not repo.enabled:
        out.health = "disabled"
        return out
    events = store.repos.events_of_repo(session=session, repo_id=repo.id,
                                        kinds=tuple(_CONCLUSIONS), limit=1)
    if events:
        out.health = _CONCLUSIONS[events[0].kind]  # type: ignore[assignment]
        out.health_reason = None if out.health == "healthy" else events[0].message
    return out


def list_repositories(*, session: Session) -> ReposPublic:
    """Every tracked repository, with its health."""
    rows = store.repos.list_repos(session=session)
    return ReposPublic(data=[repository_public(session=session, repo=r) for r in rows], count=len(rows))


def get_repository(*, session: Session, repo_id: int) -> RepoPublic:
    """One tracked repository, with its health.

    Raises:
        NotFound: No repository has that id.
    """
    return repository_public(session=session, repo=store.repos.get_repo(session=session, repo_id=repo_id))


def update_repository(*, session: Session, repo_id: int, repo_in: RepoUpdate,
                      mirrors_dir: Path, files: FilePolicy | None = None,
                      secret_refs: list[str] | None = None,
                      allow_private_webhooks: bool = False) -> RepoPublic:
    """Change a tracked repository (only the fields given).

    Args:
        session: Open session (the caller commits).
        repo_id: Tracked repository.
        repo_in: The fields to change.
        mirrors_dir: Where remote repositories are mirrored (``<data_dir>/mirrors``).
        files: Which recipe/criteria files may be named (default: any).
        secret_refs: Server variables ``secret://NAME`` may name (default: any).
        allow_private_webhooks: Accept webhook targets on private addresses.

    Raises:
        NotFound: No repository has that id.
        ValidationFailed: A new branch or ``last_measured_sha`` is not in the repository,
            or the resulting re-gate request does not validate.
        Conflict: The new (url, branch) pair is already tracked.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    if repo_in.notify:
        check_webhook_targets(repo_in.notify, allow_private=allow_private_webhooks)
    fields: dict[str, Any] = {}
    for name in repo_in.model_fields_set:
        value = getattr(repo_in, name)
        if value is None and name not in ("executor", "last_measured_sha"):
            raise ValidationFailed(name, "may not be null")
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json", exclude_none=name == "workload")
        fields[name] = value
    if "branch" in fields and fields["branch"] != repo.branch:
        head = branch_head_or_422(repo.url, fields["branch"])
        # Another branch has another history: its first check sets a new baseline.
        fields.setdefault("last_measured_sha", None)
    else:
        head = repo.last_measured_sha or branch_head_or_422(repo.url, repo.branch)
    sha = fields.get("last_measured_sha")
    if sha is not None:
        try:
            known = commit_exists(repo.url, sha, mirrors_dir=mirrors_dir)
        except GitError as exc:
            raise ValidationFailed("url", str(exc)) from None
        if not known:
            raise ValidationFailed("last_measured_sha", f"{sha} is not a commit of {repo.url}")
    if fields.get("executor", "unset") is None:
        fields.pop("executor")
    store.repos.update_repo(session=session, repo=repo, **fields)
    validate_request(repo, sha or head, files, secret_refs)
    if sha is not None:
        store.repos.add_event(session=session, repository_id=repo.id, kind="baseline",
                              candidate_sha=sha, message="measured head set by hand")
    return RepoPublic.model_validate(repo)


def remove_repository(*, session: Session, repo_id: int) -> None:
    """Stop tracking a repository (its gates stay in the ledger).

    Raises:
        NotFound: No repository has that id.
    """
    store.repos.delete_repo(session=session, repo_id=repo_id)


def bisection_conflicts(bisections: list[BisectionPublic]) -> list[str]:
    """Warnings for found bisections of one regression (overlapping commit ranges) that
    named different first bad commits (e.g. a slow creep over several commits)."""
    found = [b for b in bisections if b.status == "found" and b.first_bad_sha]
    warnings = []
    for i, one in enumerate(found):
        for other in found[i + 1:]:
            if one.first_bad_sha != other.first_bad_sha and set(one.commits) & set(other.commits):
                warnings.append(
                    f"bisections {one.id} and {other.id} cover the same commits but named "
                    f"different first bad commits ({(one.first_bad_sha or '')[:12]} vs "
                    f"{(other.first_bad_sha or '')[:12]}): the slowdown may be spread over "
                    "several commits (slow creep) or the noise is above the tolerance")
    return warnings


def get_repository_view(*, session: Session, repo_id: int, limit: int = 50,
                        mirrors_dir: Path | None = None) -> RepoViewPublic:
    """A tracked repository with its recent events, bisections and webhook deliveries.

    Args:
        session: Open session.
        repo_id: The repository.
        limit: Events and deliveries shown at most.
        mirrors_dir: Where remote repositories are mirrored; when given, the commit
            subjects of the SHAs shown are read (local git only, no network).

    Raises:
        NotFound: No repository has that id.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    bisections = []
    for b in store.repos.bisections_of_repo(session=session, repo_id=repo_id):
        out = BisectionPublic.model_validate(b)
        out.step_gate_ids = store.repos.step_gate_ids(session=session, bisection=b)
        bisections.append(out)
    events = [RepoEventPublic.model_validate(e)
              for e in store.repos.events_of_repo(session=session, repo_id=repo_id, limit=limit)]
    subjects: dict[str, str] = {}
    if mirrors_dir is not None:
        shas = [s for e in events for s in (e.control_sha, e.candidate_sha) if s]
        shas += [s for b in bisections for s in (b.good_sha, b.bad_sha, b.first_bad_sha) if s]
        subjects = commit_subjects(repo.url, shas, mirrors_dir=mirrors_dir)
    return RepoViewPublic(
        repo=repository_public(session=session, repo=repo),
        events=events,
        commit_subjects=subjects,
        bisection_warnings=bisection_conflicts(bisections),
        bisections=bisections,
        deliveries=[WebhookDeliveryPublic.model_validate(d)
                    for d in store.webhooks.deliveries_of_repo(session=session, repo_id=repo_id, limit=limit)],
        gate_ids_in_flight=[g.id for g in store.repos.gates_in_flight(session=session, repo_id=repo_id)],
    )


def rotate_webhook_secret(*, session: Session, repo_id: int) -> RepoCreatedPublic:
    """Give a tracked repository a new webhook signing secret (the old one stops working).

    Returns:
        The repository with its new secret, shown this once.

    Raises:
        NotFound: No repository has that id.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    store.repos.update_repo(session=session, repo=repo, webhook_secret=new_webhook_secret())
    logger.info("repo=%s webhook secret rotated", repo.id)
    return RepoCreatedPublic(**RepoPublic.model_validate(repo).model_dump(),
                             webhook_secret=repo.webhook_secret)
