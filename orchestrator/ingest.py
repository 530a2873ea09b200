"""Use cases that move a gate forward: dispatch it to an executor, ingest what its
driver wrote into the gate folder, judge it when all runs are in.

Every function is idempotent per gate: a second pass (or a restarted service) finds
what is stored and adds only what is new, so a restart re-attaches instead of
duplicating work.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.artifacts import hash_file
from orchestrator.db.models import Allocation, Gate, Run
from orchestrator.errors import RecordError
from orchestrator.executors import BaseGateExecutor, GatePlan, JobRef, JobState
from orchestrator.executors.plan import read_json, run_file_stem
from orchestrator.gate_spec import TopologySpec
from orchestrator.imports import health_check_rows
from orchestrator.lifecycle import TERMINAL_GATE_STATUSES, transition
from orchestrator.measure import measure_run
from orchestrator.records import parse
from orchestrator.verdict import (
    POLICY_NAMES,
    ControlHistory,
    GateMeasurement,
    RunSummary,
    get_policy,
    judge,
)

__all__ = ["claim_gate", "dispatch_gate", "gate_dir", "ingest_gate", "judge_gate"]

logger = logging.getLogger(__name__)

# A claimed gate must have its job recorded within this many seconds (sbatch answers in
# well under a minute; a dead dispatcher never will).
_SUBMIT_GRACE_S = 600.0


def gate_dir(data_dir: Path, gate_id: int) -> Path:
    """Folder of a gate's plan, status, logs and compile cache."""
    return Path(data_dir) / "gates" / f"{gate_id:06d}"


def build_plan(gate: Gate, data_dir: Path) -> GatePlan:
    """Turn a stored gate into the driver's plan (pure apart from reading the row)."""
    topo = TopologySpec.model_validate(gate.topology_request)
    private = {k: v for k, v in gate.policy_params.items() if k.startswith("_")}
    return GatePlan(
        gate_id=gate.id,
        gate_dir=str(gate_dir(data_dir, gate.id)),
        executor=gate.executor,
        roles=gate.run_pattern.split(),
        sides={"control": gate.control_spec, "candidate": gate.candidate_spec},
        workload=gate.workload,
        nodes=topo.nodes,
        ranks_per_node=topo.ranks_per_node,
        gpus_per_node=topo.gpus_per_node,
        num_warmup_steps=gate.num_warmup_steps,
        num_measured_steps=gate.num_measured_steps,
        health=private.get("_health", {"enabled": True}),
        run_timeout_s=float(private.get("_run_timeout_s", 1800.0)),
        max_extend=int(private.get("_max_extend", 0)),
        policy=gate.policy,
        policy_params={k: v for k, v in gate.policy_params.items() if not k.startswith("_")},
        kind="regate" if gate.kind in ("regate", "bisect") else "candidate",
        max_log_bytes=int(private.get("_max_log_bytes", 2 * 1024**3)),
    )


def claim_gate(*, session: Session, gate_id: int, one_local_at_a_time: bool = True) -> bool:
    """Atomically move a queued gate to ``submitted`` so exactly one process submits it.

    A conditional UPDATE (``WHERE status = 'queued'``) is the claim: of several
    dispatchers (``serve`` replicas, a CLI ``watch``), one gets rowcount 1. A ``local`` gate
    is only claimed while no other local gate is in flight: this machine is the
    allocation, and two gates on it would time each other.

    Returns:
        True if this caller owns the gate now (the caller commits, then submits).
    """
    gate = session.get(Gate, gate_id)
    if gate is None or gate.status != "queued":
        return False
    if one_local_at_a_time and gate.executor in ("local", "debug"):
        busy = session.scalar(
            select(Gate.id).where(Gate.executor == gate.executor, Gate.id != gate_id,
                                  Gate.status.in_(("submitted", "running"))).limit(1)
        )
        if busy is not None:
            return False
    now = dt.datetime.now(dt.timezone.utc)
    result = session.execute(
        update(Gate).where(Gate.id == gate_id, Gate.status == "queued")
        .values(status="submitted", submitted_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    session.flush()
    if result.rowcount != 1:
        return False
    session.refresh(gate)
    return True


def dispatch_gate(*, session: Session, gate: Gate, executor: BaseGateExecutor,
                  data_dir: Path) -> Gate:
    """Submit a gate claimed by :func:`claim_gate`: write its plan, submit ONE job, persist
    the job reference (the caller commits right after).

    A gate whose folder already holds a plan but no recorded job (a crash between submit
    and commit) is failed rather than submitted twice.
    """
    plan = build_plan(gate, data_dir)
    folder = Path(plan.gate_dir)
    if (folder / "plan.json").exists() and gate.job_ref is None:
        transition(gate, "failed", reason=f"a plan was already written to {folder} but no job "
                                          "was recorded (service crashed while submitting)")
        return gate
    plan.save()
    if executor.kind == "slurm":
        ref = executor.submit(plan, gate.topology_request)  # type: ignore[call-arg]
    else:
        ref = executor.submit(plan)
    gate.job_ref = ref.job_id
    gate.job_folder = ref.folder
    session.flush()
    logger.info("gate=%s submitted job=%s executor=%s", gate.id, ref.job_id, executor.kind)
    return gate


def _complete_text(path: Path) -> str:
    """The complete lines of a log that may still be written."""
    data = path.read_bytes()
    cut = data.rfind(b"\n")
    return data[: cut + 1].decode("utf-8", "replace") if cut >= 0 else ""


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


def _ingest_health(session: Session, gate: Gate, folder: Path, alloc: Allocation) -> None:
    if alloc.health_checks or read_json(folder / "health.json") is None:
        return
    log = folder / "health.log"
    parsed = parse(log.read_text(errors="replace")) if log.exists() else None
    summary = read_json(folder / "health.json")
    facts = dict(parsed.allocation or {}) if parsed else {}
    for key, value in facts.items():
        if key in ("criteria",) and not isinstance(value, dict):
            value = {"name": str(value)}
        if hasattr(alloc, key) and key not in ("id", "scheduler_job_id", "hostnames") and value is not None:
            setattr(alloc, key, value)
    alloc.health_verdict = summary.get("verdict") or alloc.health_verdict
    if parsed and parsed.health:
        store.allocations.add_health_checks(session=session, allocation=alloc,
                                            checks=health_check_rows(parsed))
    if log.exists():
        sha, size = hash_file(log)
        store.artifacts.add_artifact(session=session, path=str(log), size_bytes=size, sha256=sha,
                                     kind="health_log", gate_id=gate.id, allocation_id=alloc.id)


def _ingest_run(session: Session, gate: Gate, run: Run, folder: Path) -> None:
    if run.status in ("succeeded", "failed", "cancelled", "skipped"):
        return
    stem = run_file_stem(run.order, run.role or "X")
    started = read_json(folder / "runs" / f"{stem}.started.json")
    if started is None:
        return
    if run.status == "pending":
        transition(run, "running")
        run.command = started.get("command", [])
    log = folder / "runs" / f"{stem}.log"
    final = read_json(folder / "runs" / f"{stem}.json")
    text = log.read_text(errors="replace") if final else (_complete_text(log) if log.exists() else "")
    try:
        parsed = parse(text)
    except RecordError as exc:
        if final is None:
            return  # still running: the driver fails the run for it at the end
        parsed = None
        parse_error = str(exc)
    if parsed is not None:
        store.runs.add_steps(session=session, run=run, steps=[
            {"step": s.step, "slowest_rank_step_s": s.slowest_rank_step_s,
             "rank_step_s": s.rank_step_s, "loss": s.loss, "grad_norm": s.grad_norm, "phase": s.phase}
            for s in parsed.steps
        ])
    if final is None:
        return
    if parsed is not None:
        outcome = measure_run(parsed, expected_warmup_steps=gate.num_warmup_steps,
                              expected_measured_steps=gate.num_measured_steps)
        store.runs.update_run(session=session, run=run, **outcome.fields)
        error = final.get("error") or outcome.error
        run.source_sha = run.source_sha or parsed.provenance.get("source_sha")
    else:
        error = final.get("error") or f"malformed record output: {parse_error}"
    run.exit_code = final.get("exit_code")
    run.command = final.get("command", run.command)
    sha, size = hash_file(log)
    store.artifacts.add_artifact(session=session, path=str(log), size_bytes=size, sha256=sha,
                                 kind="log", run_id=run.id, gate_id=gate.id)
    transition(run, "failed" if error else "succeeded", reason=error)


def _control_history(session: Session, gate: Gate, limit: int) -> ControlHistory | None:
    """Control medians of earlier succeeded gates on the same topology and recipe."""
    if limit <= 0:
        return None
    rows = session.scalars(
        select(Gate).where(Gate.id != gate.id, Gate.status == "succeeded",
                           Gate.recipe_name == gate.recipe_name)
        .order_by(Gate.id.desc()).limit(limit * 4)
    )
    pairs = []
    for other in rows:
        if other.topology_request != gate.topology_request or other.workload != gate.workload:
            continue
        medians = [r.median_step_s for r in other.runs if r.role in ("A", "B") and r.median_step_s]
        if len(medians) >= 2:
            pairs.append(tuple(medians))
        if len(pairs) >= limit:
            break
    return ControlHistory(pairs=tuple(reversed(pairs))) if pairs else None


def judge_gate(*, session: Session, gate: Gate) -> list[str]:
    """Compute and store the gate's verdicts: its own policy (primary) and every other.

    Returns:
        The verdict names stored, primary first.
    """
    runs = sorted(gate.runs, key=lambda r: r.order)
    numerator = None
    first = next((r for r in runs if r.flops_per_sample and r.peak_flops_per_gpu), None)
    if first is not None:
        numerator = first.flops_per_sample / first.peak_flops_per_gpu * 100.0
    ctrl = next((r for r in runs if r.role in ("A", "B")), None)
    cand = next((r for r in runs if r.role == "X"), None)
    measurement = GateMeasurement(
        runs=tuple(RunSummary(role=r.role, order=i, median_step_s=r.median_step_s,
                              local_batch_size=r.local_batch_size, grad_accum_steps=r.grad_accum_steps,
                              world_size=r.world_size)
                   for i, r in enumerate(runs)),
        kind="regate" if gate.kind in ("regate", "bisect") else "candidate",
        mfu_numerator_pct_s=numerator,
        control_local_batch_size=ctrl.local_batch_size if ctrl else None,
        control_grad_accum_steps=ctrl.grad_accum_steps if ctrl else None,
        candidate_local_batch_size=cand.local_batch_size if cand else None,
        candidate_grad_accum_steps=cand.grad_accum_steps if cand else None,
    )
    params = {k: v for k, v in gate.policy_params.items() if not k.startswith("_")}
    # Every policy is reported side by side (DESIGN.md section 3); the gate's own policy
    # is the primary verdict. benchmarks/results/verdict_power_2026-11-30.txt shows why
    # both matter: drift on one A X B accepts ~20% of null candidates, ratio-ci holds 1%.
    names = [gate.policy] + [n for n in POLICY_NAMES if n != gate.policy]
    stored = []
    for i, name in enumerate(names):
        policy = get_policy(name, **(params if name == gate.policy else {}))
        history = _control_history(session, gate, getattr(policy, "max_history_gates", 0))
        verdict = judge(measurement, policy, history=history)
        out = verdict.to_dict()
        store.verdicts.save_verdict(session=session, gate_id=gate.id, policy=out["policy"],
                                    policy_version=str(out["policy_version"]), params=out["params"],
                                    verdict=out["verdict"], numbers=out, is_primary=i == 0)
        stored.append(out["verdict"])
    return stored


def ingest_gate(*, session: Session, gate: Gate, data_dir: Path,
                job_state: JobState | None = None, executor: BaseGateExecutor | None = None,
                now: dt.datetime | None = None) -> Gate:
    """Read what the driver wrote so far and move the gate forward (idempotent).

    Args:
        session: Open session (the caller commits).
        gate: A submitted or running gate.
        data_dir: Service data directory.
        job_state: Scheduler state of the gate's job, from one batched poll.
        executor: Used to cancel a job that missed its queue deadline.
        now: Current time (tests).

    Returns:
        The gate.
    """
    if gate.status in TERMINAL_GATE_STATUSES:
        return gate
    folder = gate_dir(data_dir, gate.id)
    status = read_json(folder / "status.json")
    now = now or dt.datetime.now(dt.timezone.utc)
    if status is None and gate.job_ref is None:
        claimed = gate.submitted_at
        if claimed is not None and claimed.tzinfo is None:
            claimed = claimed.replace(tzinfo=dt.timezone.utc)
        if claimed is not None and (now - claimed).total_seconds() > _SUBMIT_GRACE_S:
            transition(gate, "failed", reason="the dispatcher claimed this gate but never recorded "
                                              "a job (it crashed while submitting)")
            _finish_runs(gate)
        return gate
    if status is None:
        deadline = gate.topology_request.get("queue_deadline_s")
        submitted = gate.submitted_at
        if submitted is not None and submitted.tzinfo is None:
            submitted = submitted.replace(tzinfo=dt.timezone.utc)
        if job_state is not None and job_state.terminal:
            transition(gate, "failed", reason=f"allocation job {gate.job_ref} ended in state "
                                              f"{job_state.state} before the driver started")
        elif deadline and submitted and (now - submitted).total_seconds() > deadline and not (
            job_state and job_state.started
        ):
            if executor is not None and gate.job_ref:
                executor.cancel(JobRef(job_id=gate.job_ref, folder=gate.job_folder or ""))
            transition(gate, "failed", reason=f"allocation did not start within the queue "
                                              f"deadline of {deadline:g} s")
        _finish_runs(gate)
        return gate
    if gate.status == "submitted":
        transition(gate, "running")
    alloc = _allocation_for(session, gate, status)
    _ingest_health(session, gate, folder, alloc)
    roles = status.get("roles") or gate.run_pattern.split()
    have = {r.order for r in gate.runs}
    for order, role in enumerate(roles):
        if order not in have:  # auto-extend appended X B
            store.runs.create_run(session=session, gate_id=gate.id, role=role, order=order,
                                  status="pending", allocation_id=alloc.id,
                                  source_sha=(gate.candidate_spec if role == "X" else gate.control_spec)
                                  .get("source", {}).get("sha"),
                                  env=(gate.candidate_spec if role == "X" else gate.control_spec).get("env", {}))
    session.flush()
    session.refresh(gate)
    for run in sorted(gate.runs, key=lambda r: r.order):
        _ingest_run(session, gate, run, folder)
    state = status.get("state")
    if state == "running" and job_state is not None and job_state.terminal:
        reap = getattr(executor, "reap", None)
        if reap is not None and gate.job_ref:  # the driver died: stop what it left running
            reap(JobRef(job_id=gate.job_ref, folder=gate.job_folder or ""))
        state, status["reason"] = "failed", (
            f"allocation job {gate.job_ref} ended in state {job_state.state} while the driver was running")
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
            return gate  # wait one more pass for the scheduler's final state
        scheduler = job_state.state if job_state is not None else "unknown"
        transition(gate, "failed", reason=f"allocation stopped from outside axbgate "
                                          f"({status.get('reason')}); scheduler state {scheduler}")
    _finish_runs(gate)
    session.flush()
    return gate


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


