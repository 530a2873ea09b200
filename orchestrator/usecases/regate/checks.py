"""Use case: check a tracked branch and schedule a re-gate when its head moved."""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate, TrackedRepository
from orchestrator.schemas.repos import (
    CheckResultPublic,
)
from orchestrator.settings import Settings
from orchestrator.usecases.gates import submit_gate
from orchestrator.usecases.regate.common import build_gate_request, record_event, utcnow
from orchestrator.vcs.history import GitError, branch_head

__all__ = ['check_repository', 'schedule_regate']

logger = logging.getLogger(__name__)




def schedule_regate(*, session: Session, repo: TrackedRepository, control_sha: str,
                    candidate_sha: str, settings: Settings) -> tuple[Gate | None, bool]:
    """Submit the re-gate of ``candidate_sha`` against the measured head ``control_sha``.

    The idempotency key is ``regate:<repo>:<control>:<candidate>:<attempt>``, where
    ``attempt`` counts the earlier re-gates of this pair that produced no verdict, so a
    restarted scheduler (or a second check) finds the gate instead of duplicating it.

    Returns:
        ``(gate, created)``; ``(None, False)`` after ``nightly.max_attempts`` re-gates
        of this pair produced no verdict.

    Raises:
        ValidationFailed: The stored workload no longer validates.
    """
    attempt = store.repos.count_events(session=session, repo_id=repo.id, kind="no_verdict",
                                       control_sha=control_sha, candidate_sha=candidate_sha)
    if attempt >= settings.nightly.max_attempts:
        return None, False
    gate_in = build_gate_request(
        repo, control_sha, candidate_sha, kind="regate",
        title=f"re-gate {repo.branch} {control_sha[:10]}..{candidate_sha[:10]}",
    )
    key = f"regate:{repo.id}:{control_sha}:{candidate_sha}:{attempt}"
    public, created = submit_gate(session=session, gate_in=gate_in, default_executor=repo.executor,
                                  idempotency_key=key, repository_id=repo.id)
    gate = store.gates.get_gate(session=session, gate_id=public.id)
    if created:
        logger.info("repo=%s gate=%s re-gate %s..%s attempt %d", repo.id, gate.id,
                    control_sha[:12], candidate_sha[:12], attempt)
    return gate, created


def check_repository(*, session: Session, repo_id: int, settings: Settings,
                     now: dt.datetime | None = None) -> CheckResultPublic:
    """Fetch the tracked branch's head and submit a re-gate if it moved.

    Args:
        session: Open session (the caller commits).
        repo_id: Tracked repository.
        settings: Service settings (``nightly`` section).
        now: Current time (tests).

    Returns:
        What the check did: ``baseline`` (first check: head adopted as measured head),
        ``unchanged``, ``busy`` (a re-gate or bisection is still in flight),
        ``submitted`` (``gate_id`` set; also when the gate existed already),
        ``check_failed`` (git failed: an alert is recorded and notified), ``gave_up``
        or ``disabled``.

    Raises:
        NotFound: No repository has that id.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    if not repo.enabled:
        return CheckResultPublic(repository_id=repo.id, action="disabled")
    repo.last_checked_at = now or utcnow()
    try:
        head = branch_head(repo.url, repo.branch)
    except GitError as exc:
        record_event(session, repo, settings, notify=True, kind="check_failed", alert=True,
               message=f"cannot read {repo.url} branch {repo.branch}: {exc}")
        return CheckResultPublic(repository_id=repo.id, action="check_failed", message=str(exc))
    if repo.last_measured_sha is None:
        repo.last_measured_sha = head
        record_event(session, repo, settings, kind="baseline", candidate_sha=head,
               message="first check: the head becomes the measured head; re-gates start with the next commit")
        return CheckResultPublic(repository_id=repo.id, action="baseline", head_sha=head)
    if head == repo.last_measured_sha:
        return CheckResultPublic(repository_id=repo.id, action="unchanged", head_sha=head)
    busy = store.repos.gates_in_flight(session=session, repo_id=repo.id)
    if busy or store.repos.running_bisection(session=session, repo_id=repo.id) is not None:
        ids = [g.id for g in busy]
        return CheckResultPublic(repository_id=repo.id, action="busy", head_sha=head,
                                 gate_id=ids[0] if ids else None,
                                 message=f"waiting for gates {ids} or a running bisection")
    gate, _created = schedule_regate(session=session, repo=repo, control_sha=repo.last_measured_sha,
                                     candidate_sha=head, settings=settings)
    if gate is None:
        return CheckResultPublic(repository_id=repo.id, action="gave_up", head_sha=head,
                                 message=f"{settings.nightly.max_attempts} re-gates of this pair "
                                         "produced no verdict; waiting for the branch to move")
    return CheckResultPublic(repository_id=repo.id, action="submitted", head_sha=head, gate_id=gate.id)
