"""Use cases of the nightly re-gate (issue 7): tracked repositories, checks, re-gates,
outcomes and bisection. Each public function is one transaction's worth of work (the
caller commits).

Decisions documented here:

* First check of a repository without a measured head: the current head becomes the
  measured head (``baseline`` event) without a gate; re-gates start with the next
  commit. A re-gate needs a control that someone accepted as the reference, and the
  head at the time the branch was added is that reference.
* ``pass``: the candidate becomes the measured head; the stopping point carries over
  to it as timing-neutral (``carries_over`` on the event).
* ``improvement``: flagged and notified, and the candidate also becomes the measured
  head (otherwise every later re-gate would compare against the slower source and a
  later regression smaller than the improvement would pass unnoticed).
* ``regression``: flagged and notified; the measured head stays, so later commits keep
  being compared with the last good source until the regression is fixed or a person
  accepts it (``PATCH /repos/{id}`` with ``last_measured_sha``).
* No verdict (job never started, health failed, a run crashed, cancelled): a
  ``no_verdict`` alert and notification. The pair is re-gated at the next check up to
  ``nightly.max_attempts`` times, then the scheduler waits for the branch to move.
* One re-gate (or bisection) per repository at a time; idempotency keys per
  (repository, control, candidate, attempt) and per bisection step make a restarted
  scheduler find its gates instead of submitting them again.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Bisection, Gate, RepoEvent, TrackedRepository
from orchestrator.domain.errors import NotFound, ValidationFailed
from orchestrator.domain.gate_spec import GateCreate
from orchestrator.schemas.repos import (
    BisectionPublic,
    CheckResultPublic,
    RepoCreate,
    RepoEventPublic,
    RepoPublic,
    ReposPublic,
    RepoUpdate,
    RepoViewPublic,
    WebhookDeliveryPublic,
)
from orchestrator.settings import Settings
from orchestrator.usecases.gates import resolve_recipe, submit_gate
from orchestrator.usecases.notify import enqueue_notifications
from orchestrator.vcs.history import GitError, branch_head, commit_exists, commits_between

__all__ = [
    "add_repository",
    "check_repository",
    "get_repository",
    "get_repository_view",
    "list_repositories",
    "on_gate_finished",
    "remove_repository",
    "schedule_regate",
    "update_repository",
]

logger = logging.getLogger(__name__)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def build_gate_request(repo: TrackedRepository, control_sha: str, candidate_sha: str, *,
                       kind: str, title: str) -> GateCreate:
    """The gate of one re-gate or bisection step: same workload/topology, two commits.

    Raises:
        pydantic.ValidationError: The stored repository options no longer validate.
    """
    opts = repo.options or {}
    env = dict(opts.get("env") or {})
    policy = opts.get("policy", "drift")
    return GateCreate.model_validate({
        "title": title[:255],
        "kind": kind,
        "family": f"repo-{repo.id}:{repo.branch}"[:255],
        "tags": [kind, f"repo-{repo.id}"],
        "control": {"source": {"repo": repo.url, "sha": control_sha}, "env": env},
        "candidate": {"source": {"repo": repo.url, "sha": candidate_sha}, "env": env},
        "workload": repo.workload,
        "topology": repo.topology,
        "run_pattern": opts.get("run_pattern", "A X B"),
        "warmup_steps": opts.get("warmup_steps", 10),
        "measured_steps": opts.get("measured_steps", 20),
        "policy": policy,
        "policy_params": {"tolerance_pct": repo.tolerance_pct},
        "executor": repo.executor,
        "health": opts.get("health") or {},
        "run_timeout_s": opts.get("run_timeout_s", 1800.0),
    })


def _head_or_422(url: str, branch: str) -> str:
    try:
        return branch_head(url, branch)
    except GitError as exc:
        raise ValidationFailed("url" if "branch" not in str(exc) else "branch", str(exc)) from None


def add_repository(*, session: Session, repo_in: RepoCreate, default_executor: str = "local") -> RepoPublic:
    """Track a branch: check that it exists and that its re-gate request validates.

    Args:
        session: Open session (the caller commits).
        repo_in: The validated request.
        default_executor: Executor when the request names none.

    Returns:
        The stored repository (no measured head yet; the first check sets it).

    Raises:
        ValidationFailed: The repository or branch cannot be read (``url``/``branch``),
            or the workload's recipe does not resolve.
        Conflict: The (url, branch) pair is already tracked.
    """
    head = _head_or_422(repo_in.url, repo_in.branch)
    fields: dict[str, Any] = {
        "url": repo_in.url, "branch": repo_in.branch,
        "workload": repo_in.workload.model_dump(mode="json", exclude_none=True),
        "topology": repo_in.topology.model_dump(mode="json"),
        "executor": repo_in.executor or default_executor, "schedule": repo_in.schedule,
        "tolerance_pct": repo_in.tolerance_pct, "notify": list(repo_in.notify), "bisect": repo_in.bisect,
        "enabled": repo_in.enabled, "options": repo_in.options.model_dump(mode="json"),
    }
    _validate_request(TrackedRepository(id=0, **fields), head)
    row = store.repos.create_repo(session=session, **fields)
    logger.info("repo=%s tracking %s branch %s (head %s)", row.id, row.url, row.branch, head[:12])
    return RepoPublic.model_validate(row)


def _validate_request(repo: TrackedRepository, sha: str) -> None:
    try:
        gate_in = build_gate_request(repo, sha, sha, kind="regate", title="validation")
    except ValueError as exc:
        raise ValidationFailed("options", str(exc)) from None
    resolve_recipe(gate_in, "control")


def list_repositories(*, session: Session) -> ReposPublic:
    """Every tracked repository."""
    rows = store.repos.list_repos(session=session)
    return ReposPublic(data=[RepoPublic.model_validate(r) for r in rows], count=len(rows))


def get_repository(*, session: Session, repo_id: int) -> RepoPublic:
    """One tracked repository.

    Raises:
        NotFound: No repository has that id.
    """
    return RepoPublic.model_validate(store.repos.get_repo(session=session, repo_id=repo_id))


def update_repository(*, session: Session, repo_id: int, repo_in: RepoUpdate,
                      mirrors_dir: Path) -> RepoPublic:
    """Change a tracked repository (only the fields given).

    Args:
        session: Open session (the caller commits).
        repo_id: Tracked repository.
        repo_in: The fields to change.
        mirrors_dir: Where remote repositories are mirrored (``<data_dir>/mirrors``).

    Raises:
        NotFound: No repository has that id.
        ValidationFailed: A new branch or ``last_measured_sha`` is not in the repository,
            or the resulting re-gate request does not validate.
        Conflict: The new (url, branch) pair is already tracked.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    fields: dict[str, Any] = {}
    for name in repo_in.model_fields_set:
        value = getattr(repo_in, name)
        if value is None and name not in ("executor", "last_measured_sha"):
            raise ValidationFailed(name, "may not be null")
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json", exclude_none=name == "workload")
        fields[name] = value
    if "branch" in fields and fields["branch"] != repo.branch:
        head = _head_or_422(repo.url, fields["branch"])
        # Another branch has another history: its first check sets a new baseline.
        fields.setdefault("last_measured_sha", None)
    else:
        head = repo.last_measured_sha or _head_or_422(repo.url, repo.branch)
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
    _validate_request(repo, sha or head)
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


def get_repository_view(*, session: Session, repo_id: int, limit: int = 50) -> RepoViewPublic:
    """A tracked repository with its recent events, bisections and webhook deliveries.

    Raises:
        NotFound: No repository has that id.
    """
    repo = store.repos.get_repo(session=session, repo_id=repo_id)
    bisections = []
    for b in store.repos.bisections_of_repo(session=session, repo_id=repo_id):
        out = BisectionPublic.model_validate(b)
        out.step_gate_ids = store.repos.step_gate_ids(session=session, bisection=b)
        bisections.append(out)
    return RepoViewPublic(
        repo=RepoPublic.model_validate(repo),
        events=[RepoEventPublic.model_validate(e)
                for e in store.repos.events_of_repo(session=session, repo_id=repo_id, limit=limit)],
        bisections=bisections,
        deliveries=[WebhookDeliveryPublic.model_validate(d)
                    for d in store.webhooks.deliveries_of_repo(session=session, repo_id=repo_id, limit=limit)],
        gate_ids_in_flight=[g.id for g in store.repos.gates_in_flight(session=session, repo_id=repo_id)],
    )


def _event(session: Session, repo: TrackedRepository, settings: Settings, *, notify: bool = False,
           gate: Gate | None = None, **fields: Any) -> RepoEvent:
    event = store.repos.add_event(session=session, repository_id=repo.id,
                                  gate_id=gate.id if gate is not None else None, **fields)
    level = logging.WARNING if fields.get("alert") else logging.INFO
    logger.log(level, "repo=%s event=%s gate=%s %s", repo.id, fields.get("kind"),
               gate.id if gate else None, fields.get("message", ""))
    if notify:
        enqueue_notifications(session=session, repo=repo, event=event, settings=settings)
    return event


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
    repo.last_checked_at = now or _utcnow()
    try:
        head = branch_head(repo.url, repo.branch)
    except GitError as exc:
        _event(session, repo, settings, notify=True, kind="check_failed", alert=True,
               message=f"cannot read {repo.url} branch {repo.branch}: {exc}")
        return CheckResultPublic(repository_id=repo.id, action="check_failed", message=str(exc))
    if repo.last_measured_sha is None:
        repo.last_measured_sha = head
        _event(session, repo, settings, kind="baseline", candidate_sha=head,
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


def _gate_numbers(gate: Gate) -> dict[str, Any]:
    primary = next((v for v in reversed(gate.verdicts) if v.is_primary), None)
    if gate.status != "succeeded" or primary is None:
        return {}
    numbers = primary.numbers or {}
    medians = {r.role: r.median_step_s for r in gate.runs}
    return {
        "verdict": primary.verdict,
        "delta_pct": numbers.get("delta_pct"),
        "drift_pct": numbers.get("drift_pct"),
        "control_median_s": numbers.get("midpoint_s") or medians.get("A"),
        "candidate_median_s": numbers.get("candidate_s") or medians.get("X"),
    }


def _flag(gate: Gate, label: str) -> None:
    tag = f"flag:{label}"
    if tag not in (gate.tags or []):
        gate.tags = [*(gate.tags or []), tag]


def on_gate_finished(*, session: Session, gate_id: int, settings: Settings) -> RepoEvent | None:
    """Process one finished re-gate or bisection step (idempotent: once per gate).

    Outcomes of a re-gate are described in the module docstring; a bisection step
    narrows its bisection and submits the next step or concludes it.

    Returns:
        The event recorded for the gate, or ``None`` when it was processed already or is
        not a finished re-gate/bisection gate of a tracked repository.
    """
    gate = session.get(Gate, gate_id)
    if gate is None or gate.repository_id is None or gate.status not in store.repos.TERMINAL:
        return None
    try:
        repo = store.repos.get_repo(session=session, repo_id=gate.repository_id)
    except NotFound:
        return None
    if gate.kind == "bisect":
        return _on_bisect_step(session, repo, gate, settings)
    control = gate.control_spec.get("source", {}).get("sha")
    candidate = gate.candidate_spec.get("source", {}).get("sha")
    numbers = _gate_numbers(gate)
    verdict = numbers.get("verdict")
    common = dict(control_sha=control, candidate_sha=candidate, **numbers)
    if verdict is None:
        attempt = 1 + store.repos.count_events(session=session, repo_id=repo.id, kind="no_verdict",
                                               control_sha=control, candidate_sha=candidate)
        retry = ("it is re-gated at the next check" if attempt < settings.nightly.max_attempts
                 else "giving up on this pair until the branch moves")
        _flag(gate, "no-verdict")
        return _event(session, repo, settings, notify=True, gate=gate, kind="no_verdict", alert=True,
                      message=f"re-gate {gate.status}: {gate.status_reason or 'no verdict'} "
                              f"(attempt {attempt}; {retry})", **common)
    head_matches = repo.last_measured_sha == control
    if verdict == "pass":
        if head_matches:
            repo.last_measured_sha = candidate
        return _event(session, repo, settings, gate=gate, kind="pass", carries_over=head_matches,
                      message="timing-neutral: the stopping point carries over to "
                              f"{(candidate or '')[:12]}", **common)
    if verdict == "improvement":
        if head_matches:
            repo.last_measured_sha = candidate
        _flag(gate, "improvement")
        return _event(session, repo, settings, notify=True, gate=gate, kind="improvement", alert=True,
                      message=f"faster by {-(numbers.get('delta_pct') or 0.0):.3f}%; "
                              "the candidate is the new measured head", **common)
    _flag(gate, "regression")
    event = _event(session, repo, settings, notify=True, gate=gate, kind="regression", alert=True,
                   message=f"slower by {numbers.get('delta_pct') or 0.0:.3f}% "
                           f"(drift {numbers.get('drift_pct') or 0.0:.3f}%)", **common)
    if repo.bisect and control and candidate:
        _maybe_start_bisection(session, repo, gate, control, candidate, settings)
    return event


def _maybe_start_bisection(session: Session, repo: TrackedRepository, gate: Gate, good: str,
                           bad: str, settings: Settings) -> Bisection | None:
    try:
        commits = commits_between(repo.url, good, bad, mirrors_dir=settings.data_dir / "mirrors")
    except GitError as exc:
        _event(session, repo, settings, notify=True, kind="bisect_failed", alert=True,
               control_sha=good, candidate_sha=bad, message=f"cannot list commits to bisect: {exc}")
        return None
    if len(commits) < 2:
        return None
    numbers = _gate_numbers(gate)
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


def _on_bisect_step(session: Session, repo: TrackedRepository, gate: Gate,
                    settings: Settings) -> RepoEvent:
    bisection = store.repos.bisection_of_step(session=session, gate=gate)
    control = gate.control_spec.get("source", {}).get("sha")
    candidate = gate.candidate_spec.get("source", {}).get("sha")
    numbers = _gate_numbers(gate)
    verdict = numbers.get("verdict")
    event = _event(session, repo, settings, gate=gate, kind="bisect_step",
                   bisection_id=bisection.id if bisection else None, control_sha=control,
                   candidate_sha=candidate, message=f"bisection step: {verdict or gate.status}",
                   **numbers)
    if bisection is None or bisection.status != "running" or candidate not in bisection.commits:
        return event
    if verdict is None:
        bisection.status = "failed"
        bisection.finished_at = _utcnow()
        bisection.message = f"step gate {gate.id} {gate.status}: {gate.status_reason or 'no verdict'}"
        _event(session, repo, settings, notify=True, kind="bisect_failed", alert=True,
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
    bisection.finished_at = _utcnow()
    bisection.message = (f"first bad commit {bisection.first_bad_sha[:12]}: delta "
                         f"{bisection.delta_pct or 0.0:+.3f}%, drift {bisection.drift_pct or 0.0:.3f}% "
                         f"(gate {bisection.first_bad_gate_id}; {bisection.num_gates} bisection gates)")
    _event(session, repo, settings, notify=True, kind="bisect_found", alert=True,
           bisection_id=bisection.id, control_sha=bisection.good_sha,
           candidate_sha=bisection.first_bad_sha, delta_pct=bisection.delta_pct,
           drift_pct=bisection.drift_pct, message=bisection.message)
    return event
