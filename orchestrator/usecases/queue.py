"""Use cases behind the background passes: which gates and repositories a pass looks at,
the scheduler lease, and recording a failure the pass itself hit on one gate.

The runtime loops (``orchestrator.runtime``) call these and never the store directly.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.domain.lifecycle import TERMINAL_GATE_STATUSES, transition

__all__ = [
    "GateJob",
    "cancelled_gates_with_jobs",
    "enabled_repository_schedules",
    "fail_gate",
    "gate_counts",
    "finished_regates_to_process",
    "gates_in_flight",
    "queue_depth",
    "queued_gate_ids",
    "release_lease",
    "repository_gates_in_flight",
    "take_lease",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GateJob:
    """A gate and the scheduler job it runs as."""

    gate_id: int
    executor: str
    job_ref: str | None
    job_folder: str | None


def queued_gate_ids(*, session: Session, gate_ids: list[int] | None = None,
                    kinds: tuple[str, ...] | None = None) -> list[int]:
    """Ids of queued gates, oldest first (only those in ``gate_ids`` when given, only of
    the executors ``kinds`` when given)."""
    return [g.id for g in store.gates.gates_with_status(session=session, statuses=("queued",),
                                                        gate_ids=gate_ids)
            if kinds is None or g.executor in kinds]


def _jobs(gates) -> list[GateJob]:
    return [GateJob(g.id, g.executor, g.job_ref, g.job_folder) for g in gates]


def gates_in_flight(*, session: Session, gate_ids: list[int] | None = None,
                    kinds: tuple[str, ...] | None = None) -> list[GateJob]:
    """Submitted and running gates with their jobs, oldest first (only of the executors
    ``kinds`` when given)."""
    return [j for j in _jobs(store.gates.gates_with_status(
        session=session, statuses=("submitted", "running"), gate_ids=gate_ids))
            if kinds is None or j.executor in kinds]


def cancelled_gates_with_jobs(*, session: Session) -> list[GateJob]:
    """Cancelled gates that had a scheduler job (it may still need a cancel)."""
    return [j for j in _jobs(store.gates.gates_with_status(session=session, statuses=("cancelled",)))
            if j.job_ref is not None]


def fail_gate(*, session: Session, gate_id: int, reason: str) -> None:
    """Fail a gate (and close its open runs) because a pass could not process it."""
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    if gate.status in TERMINAL_GATE_STATUSES:
        return
    transition(gate, "failed", reason=reason)
    for run in gate.runs:
        if run.status in ("pending", "running"):
            transition(run, "failed" if run.status == "running" else "skipped", reason=reason)
    session.flush()


def take_lease(*, session: Session, name: str, holder: str, duration_s: float) -> bool:
    """Take or renew the named lease for ``duration_s`` seconds; True when held."""
    return store.webhooks.try_acquire_lease(session=session, name=name, holder=holder,
                                            now=dt.datetime.now(dt.UTC), duration_s=duration_s)


def release_lease(*, session: Session, name: str, holder: str) -> None:
    """Give the named lease up (no-op when another holder has it)."""
    store.webhooks.release_lease(session=session, name=name, holder=holder)


def enabled_repository_schedules(*, session: Session) -> dict[int, str]:
    """Cron schedule of every enabled tracked repository, by id."""
    return {r.id: r.schedule for r in store.repos.list_repos(session=session, enabled_only=True)}


def finished_regates_to_process(*, session: Session) -> list[int]:
    """Finished re-gate and bisection gates whose outcome was not processed yet."""
    return list(store.repos.finished_unprocessed_gates(session=session))


def repository_gates_in_flight(*, session: Session, repo_ids: list[int]) -> list[int]:
    """Gates of these repositories that are queued, submitted or running."""
    return [g.id for rid in repo_ids for g in store.repos.gates_in_flight(session=session, repo_id=rid)]


def gate_counts(*, session: Session) -> dict[str, int]:
    """Number of gates in the ledger per state (states without gates are absent)."""
    return store.gates.count_gates_by(session=session, column="status")


def queue_depth(*, session: Session) -> dict[str, int]:
    """Queued gates per executor (``local``, ``slurm``, ``debug`` always present, 0 when none)."""
    counts = dict.fromkeys(("local", "slurm", "debug"), 0)
    counts.update(store.gates.count_gates_by(session=session, column="executor", statuses=("queued",)))
    return counts
