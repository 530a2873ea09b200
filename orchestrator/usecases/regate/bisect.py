"""Bisection of a multi-commit regression: one ``bisect`` gate per midpoint commit."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Bisection, Gate, RepoEvent, TrackedRepository
from orchestrator.settings import Settings
from orchestrator.usecases.gates import submit_gate
from orchestrator.usecases.regate.common import (
    build_gate_request,
    gate_numbers,
    record_event,
    utcnow,
)
from orchestrator.vcs.history import GitError, commits_between

__all__ = ["maybe_start_bisection", "on_bisect_step"]

logger = logging.getLogger(__name__)


def maybe_start_bisection(session: Session, repo: TrackedRepository, gate: Gate, good: str,
                           bad: str, settings: Settings) -> Bisection | None:
    try:
        commits = commits_between(repo.url, good, bad, mirrors_dir=settings.data_dir / "mirrors")
    except GitError as exc:
        record_event(session, repo, settings, notify=True, kind="bisect_failed", alert=True,
               control_sha=good, candidate_sha=bad, message=f"cannot list commits to bisect: {exc}")
        return None
    if len(commits) < 2:
        return None
    numbers = gate_numbers(gate)
    bisection = store.repos.create_bisection(
        session=session, repository_id=repo.id, regression_gate_id=gate.id, good_sha=good,
        bad_sha=bad, commits=commits, good_index=-1, bad_index=len(commits) - 1,
        first_bad_gate_id=gate.id, delta_pct=numbers.get("delta_pct"),
        drift_pct=numbers.get("drift_pct"), status="running",
    )
    logger.info("repo=%s bisection=%s over %d commits %s..%s", repo.id, bisection.id,
                len(commits), good[:12], bad[:12])
    _submit_bisect_step(session, repo, bisection)
    return bisection


def _submit_bisect_step(session: Session, repo: TrackedRepository, bisection: Bisection) -> Gate:
    """Gate the midpoint commit against the last good commit (kind ``bisect``)."""
    commits = list(bisection.commits)
    mid = (bisection.good_index + bisection.bad_index) // 2
    control = bisection.good_sha if bisection.good_index < 0 else commits[bisection.good_index]
    candidate = commits[mid]
    gate_in = build_gate_request(
        repo, control, candidate, kind="bisect",
        title=f"bisect {repo.branch} step {bisection.num_gates + 1}: {candidate[:10]} vs {control[:10]}",
    )
    public, created = submit_gate(
        session=session, gate_in=gate_in, default_executor=repo.executor,
        idempotency_key=f"bisect:{bisection.id}:{control}:{candidate}",
        parent_gate_id=bisection.regression_gate_id, repository_id=repo.id,
    )
    if created:
        bisection.num_gates += 1
    logger.info("repo=%s bisection=%s gate=%s step %d: %s vs %s", repo.id, bisection.id, public.id,
                bisection.num_gates, candidate[:12], control[:12])
    return store.gates.get_gate(session=session, gate_id=public.id)


def on_bisect_step(session: Session, repo: TrackedRepository, gate: Gate,
                    settings: Settings) -> RepoEvent:
    bisection = store.repos.bisection_of_step(session=session, gate=gate)
    control = gate.control_spec.get("source", {}).get("sha")
    candidate = gate.candidate_spec.get("source", {}).get("sha")
    numbers = gate_numbers(gate)
    verdict = numbers.get("verdict")
    event = record_event(session, repo, settings, gate=gate, kind="bisect_step",
                   bisection_id=bisection.id if bisection else None, control_sha=control,
                   candidate_sha=candidate, message=f"bisection step: {verdict or gate.status}",
                   **numbers)
    if bisection is None or bisection.status != "running" or candidate not in bisection.commits:
        return event
    if verdict is None:
        bisection.status = "failed"
        bisection.finished_at = utcnow()
        bisection.message = f"step gate {gate.id} {gate.status}: {gate.status_reason or 'no verdict'}"
        record_event(session, repo, settings, notify=True, kind="bisect_failed", alert=True,
               bisection_id=bisection.id, control_sha=bisection.good_sha,
               candidate_sha=bisection.bad_sha, message=bisection.message)
        return event
    index = list(bisection.commits).index(candidate)
    if verdict == "regression":
        bisection.bad_index = index
        bisection.first_bad_gate_id = gate.id
        bisection.delta_pct = numbers.get("delta_pct")
        bisection.drift_pct = numbers.get("drift_pct")
    else:
        bisection.good_index = index
    if bisection.bad_index - bisection.good_index > 1:
        _submit_bisect_step(session, repo, bisection)
        return event
    bisection.status = "found"
    bisection.first_bad_sha = bisection.commits[bisection.bad_index]
    bisection.finished_at = utcnow()
    bisection.message = (f"first bad commit {bisection.first_bad_sha[:12]}: delta "
                         f"{bisection.delta_pct or 0.0:+.3f}%, drift {bisection.drift_pct or 0.0:.3f}% "
                         f"(gate {bisection.first_bad_gate_id}; {bisection.num_gates} bisection gates)")
    record_event(session, repo, settings, notify=True, kind="bisect_found", alert=True,
           bisection_id=bisection.id, control_sha=bisection.good_sha,
           candidate_sha=bisection.first_bad_sha, delta_pct=bisection.delta_pct,
           drift_pct=bisection.drift_pct, message=bisection.message)
    return event
