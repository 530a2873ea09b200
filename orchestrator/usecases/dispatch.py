"""Use cases that hand a queued gate to its executor: claim it (exactly one process does),
take its control history, write its plan, submit ONE allocation-sized job."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate
from orchestrator.domain.gate_spec import GateOptions, TopologySpec
from orchestrator.domain.lifecycle import transition
from orchestrator.executors import BaseGateExecutor, GatePlan
from orchestrator.executors.plan import GatePaths
from orchestrator.executors.runenv import RunEnvPolicy
from orchestrator.usecases.judge import control_history
from orchestrator.verdict import verdict_kind

__all__ = ["build_plan", "claim_gate", "dispatch_gate"]

logger = logging.getLogger(__name__)


def build_plan(gate: Gate, data_dir: Path, run_env: RunEnvPolicy | None = None) -> GatePlan:
    """Turn a stored gate into the driver's plan (pure apart from reading the row).

    Args:
        gate: The stored gate.
        data_dir: Service data directory.
        run_env: What the runs' environment is built from (default: the built-in
            allow-list and secret patterns).
    """
    topo = TopologySpec.model_validate(gate.topology_request)
    options = GateOptions.model_validate(gate.options or {})
    return GatePlan(
        gate_id=gate.id,
        gate_dir=str(GatePaths.of(data_dir, gate.id).root),
        executor=gate.executor,
        roles=gate.run_pattern.split(),
        sides={"control": gate.control_spec, "candidate": gate.candidate_spec},
        workload=gate.workload,
        nodes=topo.nodes,
        ranks_per_node=topo.ranks_per_node,
        gpus_per_node=topo.gpus_per_node,
        num_warmup_steps=gate.num_warmup_steps,
        num_measured_steps=gate.num_measured_steps,
        health=options.health.model_dump(mode="json"),
        run_timeout_s=options.run_timeout_s,
        max_extend=options.max_extend,
        policy=gate.policy,
        policy_params=dict(gate.policy_params),
        kind=verdict_kind(gate.kind),
        control_history=[list(p) for p in gate.control_history or []],
        design_seed=gate.design_seed,
        auto_window=options.auto_window,
        max_window_s=options.max_window_s,
        max_log_bytes=options.max_log_bytes,
        run_env=(run_env or RunEnvPolicy.from_plan(None)).to_plan(),
        warmup_mode=options.warmup_mode,
        max_warmup_steps=options.max_warmup_steps,
        measured_seconds=options.measured_seconds,
        fork_server=options.fork_server,
        preamble=topo.preamble,
        declared_changes=list(options.declare_changes),
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
    if one_local_at_a_time and gate.executor in ("local", "debug") and store.gates.gate_in_flight_on(
        session=session, executor=gate.executor, exclude_id=gate_id
    ) is not None:
        return False
    if not store.gates.claim_queued_gate(session=session, gate_id=gate_id,
                                         now=dt.datetime.now(dt.timezone.utc)):
        return False
    session.refresh(gate)
    return True


def dispatch_gate(*, session: Session, gate_id: int,
                  executors: Callable[[str], BaseGateExecutor], data_dir: Path,
                  run_env: RunEnvPolicy | None = None) -> Gate:
    """Submit a gate claimed by :func:`claim_gate`: take its control history, write its
    plan, submit ONE job, persist the job reference (the caller commits right after).

    A gate whose folder already holds a plan but no recorded job (a crash between submit
    and commit) is failed rather than submitted twice. The claim is checked again under
    the gate's row lock, held until the caller commits: a poller that found the claim
    without plan or job and queued the gate again wins, and nothing is submitted.

    Args:
        session: Open session (the caller commits).
        gate_id: A gate this process claimed.
        executors: Returns the executor of a kind (``local``, ``slurm``, ``debug``).
        data_dir: Service data directory.
        run_env: What the runs' environment is built from (``security`` settings).
    """
    gate = store.gates.get_gate(session=session, gate_id=gate_id)
    if gate.executor != "debug":  # a debug gate runs inside this call: no lock for its length
        gate = store.gates.lock_gate(session=session, gate_id=gate_id)
        if gate.status != "submitted" or gate.job_ref is not None:
            logger.info("gate=%s no longer claimed by this dispatcher (%s): not submitted", gate_id,
                        gate.status)
            return gate
    executor = executors(gate.executor)
    paths = GatePaths.of(data_dir, gate.id)
    if paths.plan.exists() and gate.job_ref is None:
        transition(gate, "failed", reason=f"a plan was already written to {paths.root} but no job "
                                          "was recorded (service crashed while submitting)")
        return gate
    if gate.control_history is None:
        gate.control_history, gate.control_history_gate_ids = control_history(
            session=session, gate=gate)
    plan = build_plan(gate, data_dir, run_env)
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
