"""Use case: act on a finished re-gate (move the measured head, flag, alert, notify)."""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate, RepoEvent
from orchestrator.domain.errors import NotFound
from orchestrator.settings import Settings
from orchestrator.usecases.regate.bisect import maybe_start_bisection, on_bisect_step
from orchestrator.usecases.regate.common import flag_gate, gate_numbers, record_event

__all__ = ['on_gate_finished']

logger = logging.getLogger(__name__)






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
        return on_bisect_step(session, repo, gate, settings)
    control = gate.control_spec.get("source", {}).get("sha")
    candidate = gate.candidate_spec.get("source", {}).get("sha")
    numbers = gate_numbers(gate)
    verdict = numbers.get("verdict")
    common = dict(control_sha=control, candidate_sha=candidate, **numbers)
    if verdict is None:
        attempt = 1 + store.repos.count_events(session=session, repo_id=repo.id, kind="no_verdict",
                                               control_sha=control, candidate_sha=candidate)
        retry = ("it is re-gated at the next check" if attempt < settings.nightly.max_attempts
                 else "giving up on this pair until the branch moves")
        flag_gate(gate, "no-verdict")
        return record_event(session, repo, settings, notify=True, gate=gate, kind="no_verdict", alert=True,
                      message=f"re-gate {gate.status}: {gate.status_reason or 'no verdict'} "
                              f"(attempt {attempt}; {retry})", **common)
    head_matches = repo.last_measured_sha == control
    if verdict == "pass":
        if head_matches:
            repo.last_measured_sha = candidate
        return record_event(session, repo, settings, gate=gate, kind="pass", carries_over=head_matches,
                      message="timing-neutral: the stopping point carries over to "
                              f"{(candidate or '')[:12]}", **common)
    if verdict == "improvement":
        if head_matches:
            repo.last_measured_sha = candidate
        flag_gate(gate, "improvement")
        return record_event(session, repo, settings, notify=True, gate=gate, kind="improvement", alert=True,
                      message=f"faster by {-(numbers.get('delta_pct') or 0.0):.3f}%; "
                              "the candidate is the new measured head", **common)
    flag_gate(gate, "regression")
    event = record_event(session, repo, settings, notify=True, gate=gate, kind="regression", alert=True,
                   message=f"slower by {numbers.get('delta_pct') or 0.0:.3f}% "
                           f"(drift {numbers.get('drift_pct') or 0.0:.3f}%)", **common)
    if repo.bisect and control and candidate:
        maybe_start_bisection(session, repo, gate, control, candidate, settings)
    return event
