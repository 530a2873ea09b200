"""Use case: move a dispatched gate forward from what its driver wrote.

The driver parses each run's output once, on the allocation, and writes the results into
the gate folder (:class:`~orchestrator.executors.plan.GatePaths`): step records as they are
printed (``NN-R.steps.jsonl``), the measured outcome when the run ends (``NN-R.json``), the
health gate's reading (``health.json``) and its own state (``status.json``). This module
stores what it finds there and never parses a log. Every pass holds the gate's row lock
(:func:`orchestrator.store.gates.lock_gate`), so one writer ingests a run even when a CLI
and a server poll the same ledger, and every pass is idempotent: a restarted service
re-attaches instead of duplicating work.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import math
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Allocation, Gate, Run
from orchestrator.domain.lifecycle import TERMINAL_GATE_STATUSES, transition
from orchestrator.executors import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.executors.slurm_states import (
    SlurmJobInfo,
    base_state,
    end_reason,
    external_gate_status,
    pending_text,
)
from orchestrator.usecases.judge import judge_gate

__all__ = ["RunEnd", "collect_steps", "ingest_gate"]

logger = logging.getLogger(__name__)

# A claimed gate must have its job recorded within this many seconds (sbatch answers in
# well under a minute; a dead dispatcher never will).
_SUBMIT_GRACE_S = 600.0
_REQUEUE_GRACE_S = 30.0
"""A claim without plan or job younger than this is a dispatch in progress, not a dead one
(a live dispatcher writes the plan within a second locally, sbatch answers in seconds); the
poller of the same server runs every pass and once requeued a gate mid-dispatch."""
_MAX_STEP_LINES_PER_PASS = 200_000
"""Step records stored per run and pass; the rest waits for the next pass."""


@dataclasses.dataclass(frozen=True)
class RunEnd:
    """A run whose measured result the ledger stored in this pass (for metrics and logs)."""

    gate_id: int
    order: int
    role: str
    status: str
    """``succeeded`` or ``failed``."""
    wall_s: float | None
    """Launch to exit on the allocation, seconds, as the driver measured it."""


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value


def _allocation_for(session: Session, gate: Gate, status: dict[str, Any]) -> Allocation:
    if gate.allocation_id is not None:
        return session.get(Allocation, gate.allocation_id)  # type: ignore[return-value]
    topo = gate.topology_request
    alloc = store.allocations.create_allocation(session=session, facts={
        "scheduler_job_id": status.get("scheduler_job_id"),
        "executor": gate.executor,
        "hostnames": status.get("hostnames") or [],
        "num_nodes": topo.get("nodes", 1),
        "gpus_per_node": topo.get("gpus_per_node") or None,
        "health_verdict": "unknown",
    })
    gate.allocation_id = alloc.id
    for run in gate.runs:
        run.allocation_id = alloc.id
    return alloc


def _ingest_health(session: Session, gate: Gate, paths: GatePaths, alloc: Allocation) -> None:
    summary = read_json(paths.health_result())
    if alloc.health_checks or summary is None:
        return
    for key, value in (summary.get("allocation") or {}).items():
        if key == "criteria" and not isinstance(value, dict):
            value = {"name": str(value)}
        if hasattr(alloc, key) and key not in ("id", "scheduler_job_id", "hostnames") and value is not None:
            setattr(alloc, key, value)
    alloc.health_verdict = summary.get("verdict") or alloc.health_verdict
    if summary.get("checks"):
        store.allocations.add_health_checks(session=session, allocation=alloc, checks=summary["checks"])
    if summary.get("log_sha256"):
        store.artifacts.add_artifact(session=session, path=str(paths.health_log()),
                                     size_bytes=summary["log_size_bytes"], sha256=summary["log_sha256"],
                                     kind="health_log", gate_id=gate.id, allocation_id=alloc.id)


def _step_from_json(line: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
        step = int(row["step"])
    except (ValueError, KeyError, TypeError, RecursionError):
        return None  # the driver wrote it; a torn or foreign line is skipped, not fatal
    if not isinstance(row, dict) or not 0 <= step <= 2**63 - 1:
        return None
    out: dict[str, Any] = {"step": step}
    for key in ("slowest_rank_step_s", "rank_step_s", "loss", "grad_norm"):
        value = row.get(key)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        out[key] = float(value) if ok else None
    if out["slowest_rank_step_s"] is None and out["rank_step_s"] is None:
        return None  # a step record carries at least one of the two times
    phase = row.get("phase")
    out["phase"] = phase if isinstance(phase, str) and len(phase) <= 16 else None
    return out


def _ingest_steps(session: Session, run: Run, path: Path) -> int:
    """Store the complete step lines appended since the last pass (byte offset on the run)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size <= run.steps_ingested_bytes:
        return 0
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as fh:
        fh.seek(run.steps_ingested_bytes)
        offset = run.steps_ingested_bytes
        for line in fh:
            if not line.endswith(b"\n") or len(rows) >= _MAX_STEP_LINES_PER_PASS:
                break  # a line still being written, or enough for this pass
            offset += len(line)
            row = _step_from_json(line)
            if row is not None:
                rows.append(row)
    store.runs.add_steps(session=session, run=run, steps=rows)
    run.steps_ingested_bytes = offset
    return len(rows)


def _ingest_run(session: Session, gate: Gate, run: Run, paths: GatePaths) -> RunEnd | None:
    if run.status in ("succeeded", "failed", "cancelled", "skipped"):
        return None
    role = run.role or "X"
    started = read_json(paths.run_started(run.order, role))
    if started is None:
        return None
    if run.status == "pending":
        transition(run, "running")
        run.command = started.get("command", [])
    _ingest_steps(session, run, paths.run_steps(run.order, role))
    final = read_json(paths.run_result(run.order, role))
    if final is None:
        return None
    outcome = final.get("outcome")
    if outcome is None:
        error = final.get("error") or "the run's result was written without a measured outcome"
    else:
        if outcome.get("fields"):
            store.runs.update_run(session=session, run=run, **outcome["fields"])
        error = final.get("error") or outcome.get("error")
        prov = (outcome.get("fields") or {}).get("provenance") or {}
        run.source_sha = run.source_sha or prov.get("source_sha")
    run.exit_code = final.get("exit_code")
    run.command = final.get("command", run.command)
    leftovers = final.get("leftovers")
    if isinstance(leftovers, dict) and leftovers.get("count"):
        run.result_extra = {**(run.result_extra or {}), "leftovers": leftovers}
    log_path = paths.run_log(run.order, role)
    if error is None and final.get("log_sha256") and _log_changed(log_path, final):
        error = (f"{log_path.relative_to(paths.root)} changed after the driver hashed it: the run's "
                 "numbers are not evidence")
    if final.get("log_sha256"):
        store.artifacts.add_artifact(session=session, path=str(paths.run_log(run.order, role)),
                                     size_bytes=final["log_size_bytes"], sha256=final["log_sha256"],
                                     kind="log", run_id=run.id, gate_id=gate.id)
    transition(run, "failed" if error else "succeeded", reason=error)
    wall_s = final.get("wall_s")
    return RunEnd(gate.id, run.order, role, run.status,
                  float(wall_s) if isinstance(wall_s, (int, float)) and math.isfinite(wall_s) else None)


def _log_changed(log_path: Path, final: dict[str, Any]) -> bool:
    """Whether a run log's bytes differ from what the driver hashed when the run ended."""
    from orchestrator.executors.files import hash_file

    try:
        sha, size = hash_file(log_path)
    except OSError:
        return True
    return (sha, size) != (final.get("log_sha256"), final.get("log_size_bytes"))


def _add_extension_runs(session: Session, gate: Gate, roles: list[str], alloc: Allocation) -> None:
    """Create the runs the driver appended while extending the pattern."""
    have = {r.order for r in gate.runs}
    for order, role in enumerate(roles):
        if order in have:
            continue
        spec = gate.candidate_spec if role == "X" else gate.control_spec
        store.runs.create_run(session=session, gate_id=gate.id, role=role, order=order,
                              status="pending", allocation_id=alloc.id,
                              source_sha=spec.get("source", {}).get("sha"), env=spec.get("env", {}))
    session.flush()
    session.refresh(gate)


def _info(job_state: JobState) -> SlurmJobInfo:
    return SlurmJobInfo(job_state.state, job_state.reason, job_state.exit_code)


def _before_driver(gate: Gate, job_state: JobState | None, executor: BaseGateExecutor | None,
                   now: dt.datetime, paths: GatePaths) -> None:
    """A gate whose driver has not written its status yet: fail it when it cannot start.

    A claimed gate with neither a plan nor a job for more than ``_REQUEUE_GRACE_S`` (its
    dispatcher died between the claim and the plan) goes back to ``queued``: nothing ran, and a dispatcher that is still
    alive re-checks the claim under the same row lock before it writes the plan
    (:func:`orchestrator.usecases.dispatch.dispatch_gate`)."""
    claimed_for = None if gate.submitted_at is None else (now - _aware(gate.submitted_at)).total_seconds()
    if (gate.job_ref is None and not paths.plan.exists() and gate.status == "submitted"
            and claimed_for is not None and claimed_for > _REQUEUE_GRACE_S):
        transition(gate, "queued")
        gate.submitted_at = None
        gate.status_reason = "claimed by a dispatcher that stopped before writing the plan; queued again"
        logger.warning("gate=%s claimed but no plan and no job: queued again", gate.id,
                       extra={"event": "gate.requeued", "gate_id": gate.id})
        return
    if gate.job_ref is None:
        claimed = _aware(gate.submitted_at)
        if claimed is not None and (now - claimed).total_seconds() > _SUBMIT_GRACE_S:
            transition(gate, "failed", reason="the dispatcher claimed this gate but never recorded "
                                              "a job (it crashed while submitting)")
        return
    deadline = gate.topology_request.get("queue_deadline_s")
    submitted = _aware(gate.submitted_at)
    if job_state is not None and job_state.terminal:
        info = _info(job_state)
        transition(gate, external_gate_status(info),
                   reason=f"{end_reason(gate.job_ref, info)}, before the driver started")
        return
    if deadline and submitted and (now - submitted).total_seconds() > deadline and not (
        job_state and job_state.started
    ):
        if executor is not None:
            executor.cancel(JobRef(job_id=gate.job_ref, folder=gate.job_folder or ""))
        transition(gate, "failed", reason=f"allocation did not start within the queue "
                                          f"deadline of {deadline:g} s")
    elif job_state is not None and base_state(job_state.state) == "PENDING":
        gate.status_reason = pending_text(job_state.reason)  # shown while queued


def _apply_driver_state(session: Session, gate: Gate, status: dict[str, Any],
                        job_state: JobState | None, executor: BaseGateExecutor | None) -> None:
    state = status.get("state")
    if state == "running" and job_state is not None and job_state.terminal:
        reap = getattr(executor, "reap", None)
        if reap is not None and gate.job_ref:  # the driver died: stop what it left running
            reap(JobRef(job_id=gate.job_ref, folder=gate.job_folder or ""))
        info = _info(job_state)
        state = external_gate_status(info)
        status["reason"] = f"{end_reason(gate.job_ref, info)}, while the driver was running"
    if state == "cancelled" and gate.status != "cancelled" and job_state is not None \
            and job_state.terminal and base_state(job_state.state) == "CANCELLED":
        reason = status.get("reason")
        if status.get("state") == "cancelled":  # the driver saw SIGTERM; Slurm says who sent it
            reason = f"{end_reason(gate.job_ref, _info(job_state))} (driver: {reason})"
        transition(gate, "cancelled", reason=reason)
        return
    if state == "finished":
        if all(r.status == "succeeded" for r in gate.runs):
            judge_gate(session=session, gate=gate)
            transition(gate, "succeeded")
        else:
            transition(gate, "failed", reason="driver finished but not every run succeeded")
    elif state == "failed":
        transition(gate, "failed", reason=status.get("reason"))
    elif state == "cancelled":
        # The ledger moves to "cancelled" before it signals the job; a driver that was
        # stopped while the ledger still says running was stopped from outside axbgate
        # (Slurm's time limit, an admin's scancel, a node failure): that is a failure.
        if job_state is not None and not job_state.terminal:
            return  # wait one more pass for the scheduler's final state
        if job_state is None:
            transition(gate, "failed", reason=f"allocation stopped from outside axbgate "
                                              f"({status.get('reason')}); scheduler state unknown")
        else:
            transition(gate, "failed", reason=f"{end_reason(gate.job_ref, _info(job_state))} "
                                              f"(driver: {status.get('reason')})")


def ingest_gate(*, session: Session, gate_id: int, data_dir: Path,
                job_state: JobState | None = None, executor: BaseGateExecutor | None = None,
                now: dt.datetime | None = None, ended: list[RunEnd] | None = None) -> Gate | None:
    """Store what the driver wrote so far and move the gate forward (idempotent).

    Args:
        session: Open session (the caller commits).
        gate_id: A submitted or running gate.
        data_dir: Service data directory.
        job_state: Scheduler state of the gate's job, from one batched poll.
        executor: Used to cancel a job that missed its queue deadline.
        now: Current time (tests).
        ended: When given, a :class:`RunEnd` is appended for every run whose measured
            result was stored in this call.

    Returns:
        The gate, or ``None`` if it does not exist.
    """
    gate = store.gates.lock_gate(session=session, gate_id=gate_id)
    if gate is None or gate.status in TERMINAL_GATE_STATUSES:
        return gate
    paths = GatePaths.of(data_dir, gate.id)
    status = read_json(paths.status)
    if status is None:
        _before_driver(gate, job_state, executor, now or dt.datetime.now(dt.timezone.utc), paths)
    else:
        if gate.status == "submitted":
            transition(gate, "running")
            gate.status_reason = None  # the pending reason shown while queued
        alloc = _allocation_for(session, gate, status)
        _ingest_health(session, gate, paths, alloc)
        _add_extension_runs(session, gate, status.get("roles") or gate.run_pattern.split(), alloc)
        for run in sorted(gate.runs, key=lambda r: r.order):
            end = _ingest_run(session, gate, run, paths)
            if end is not None and ended is not None:
                ended.append(end)
        _apply_driver_state(session, gate, status, job_state, executor)
    if gate.status == "failed" and job_state is not None and base_state(job_state.state) == "PREEMPTED":
        from orchestrator.usecases.preemption import resubmit_preempted

        if (new := resubmit_preempted(session=session, gate=gate)) is not None:
            gate.status_reason = (f"{gate.status_reason}; resubmitted once as gate {new.id} (its own "
                                  "allocation and verdict: this gate's runs are not judged with it)")
    _finish_runs(gate)
    session.flush()
    return gate


def collect_steps(*, session: Session, gate_id: int, data_dir: Path) -> int:
    """Store the steps a cancelled gate's runs printed before they were stopped.

    Returns:
        Step records offered to the ledger.
    """
    gate = store.gates.lock_gate(session=session, gate_id=gate_id)
    if gate is None:
        return 0
    paths = GatePaths.of(data_dir, gate.id)
    return sum(_ingest_steps(session, run, paths.run_steps(run.order, run.role or "X"))
               for run in gate.runs)


def _finish_runs(gate: Gate) -> None:
    """Close the runs of a gate that ended: the ones that never ran are skipped."""
    if gate.status not in TERMINAL_GATE_STATUSES:
        return
    for run in gate.runs:
        if run.status == "pending":
            transition(run, "skipped", reason=gate.status_reason or gate.status)
        elif run.status == "running":
            transition(run, "cancelled" if gate.status == "cancelled" else "failed",
                       reason=gate.status_reason or gate.status)
