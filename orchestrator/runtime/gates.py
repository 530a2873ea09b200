"""Dispatcher and poller passes over the ledger (used by ``axbgate serve`` and the CLI)."""

from __future__ import annotations

import datetime as dt
import logging
import time

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator.executors import BaseGateExecutor, JobRef, JobState, build_executor
from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.domain.lifecycle import TERMINAL_GATE_STATUSES
from orchestrator.executors.runenv import RunEnvPolicy
from orchestrator.runtime import metrics
from orchestrator.runtime.loop import LoopService, RepeatedErrors
from orchestrator.settings import Settings
from orchestrator.usecases import queue
from orchestrator.usecases.dispatch import claim_gate, dispatch_gate
from orchestrator.usecases.progress import RunEnd, collect_steps, ingest_gate

__all__ = ["SERVER_EXECUTORS", "Dispatcher", "Poller", "dispatch_pass", "poll_pass"]

logger = logging.getLogger(__name__)


class _Executors:
    """One executor object per kind, built on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cache: dict[str, BaseGateExecutor] = {}

    def get(self, kind: str) -> BaseGateExecutor:
        """The executor of ``kind``; its scheduler calls are counted in
        :data:`~orchestrator.runtime.metrics.SCHEDULER_CALLS`."""
        if kind not in self._cache:
            self._cache[kind] = metrics.InstrumentedExecutor(build_executor(  # type: ignore[assignment]
                kind, data_dir=self.settings.data_dir,
                partition=self.settings.executor.slurm_partition,
                account=self.settings.executor.slurm_account,
            ))
        return self._cache[kind]


SERVER_EXECUTORS = ("local", "slurm")
"""Executors a server runs; ``debug`` gates run inside the CLI process that submitted them."""


def dispatch_pass(engine: Engine, settings: Settings, executors: _Executors | None = None,
                  gate_ids: list[int] | None = None, kinds: tuple[str, ...] | None = None) -> int:
    """Submit every queued gate (one transaction per gate). Returns how many.

    Args:
        engine: Ledger engine.
        settings: Process settings (data dir, executor defaults, ``security``).
        executors: Executor cache (one per kind).
        gate_ids: Only these gates.
        kinds: Only gates of these executors (the server passes :data:`SERVER_EXECUTORS`).
    """
    executors = executors or _Executors(settings)
    with metrics.timed_pass("dispatch"):
        run_env = RunEnvPolicy.from_settings(settings.security)
        with Session(engine, expire_on_commit=False) as session:
            ids = queue.queued_gate_ids(session=session, gate_ids=gate_ids, kinds=kinds)
        count = 0
        for gate_id in ids:
            count += _dispatch_one(engine, settings, executors, run_env, gate_id)
    return count


def _dispatch_one(engine: Engine, settings: Settings, executors: _Executors, run_env: RunEnvPolicy,
                  gate_id: int) -> int:
    """Claim and submit one gate (1), or leave it to another process (0)."""
    start = time.perf_counter()
    with Session(engine, expire_on_commit=False) as session:
        if not claim_gate(session=session, gate_id=gate_id):
            session.rollback()
            return 0
        session.commit()
        try:
            gate = dispatch_gate(session=session, gate_id=gate_id, executors=executors.get,
                                 data_dir=settings.data_dir, run_env=run_env)
            session.commit()
        except Exception as exc:  # sbatch refused, folder unwritable: fail, do not loop
            logger.exception("gate=%s submit failed", gate_id,
                             extra={"event": "gate.dispatch_failed", "gate_id": gate_id})
            session.rollback()
            metrics.GATES_DISPATCHED.labels(executor="unknown", outcome="failed").inc()
            _fail(session, gate_id, f"submission failed: {exc}")
            return 1
    _observe_dispatch(gate, time.perf_counter() - start)
    return 1


def _observe_dispatch(gate, seconds: float) -> None:
    """Metrics and the INFO line of one dispatched gate (``seconds``: claim to commit)."""
    metrics.DISPATCH_SECONDS.labels(executor=gate.executor).observe(seconds)
    metrics.GATES_DISPATCHED.labels(executor=gate.executor, outcome=gate.status).inc()
    if gate.submitted_at is not None and gate.created_at is not None:
        wait = (_utc(gate.submitted_at) - _utc(gate.created_at)).total_seconds()
        metrics.QUEUE_WAIT_SECONDS.labels(executor=gate.executor).observe(max(wait, 0.0))
    logger.info("gate=%s dispatched: state=%s job=%s executor=%s in %.3f s", gate.id,
                gate.status, gate.job_ref, gate.executor, seconds,
                extra={"event": "gate.dispatched", "gate_id": gate.id, "state": gate.status,
                       "executor": gate.executor, "job_ref": gate.job_ref,
                       "duration_s": round(seconds, 6)})


def _utc(value: dt.datetime) -> dt.datetime:
    """A naive timestamp from SQLite is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


def poll_pass(engine: Engine, settings: Settings, executors: _Executors | None = None,
              gate_ids: list[int] | None = None, kinds: tuple[str, ...] | None = None,
              errors: RepeatedErrors | None = None) -> int:
    """Ingest every gate in flight; cancel jobs of gates cancelled in the ledger.

    One batched scheduler query per executor kind. Returns gates looked at.

    Args:
        engine: Ledger engine.
        settings: Process settings.
        executors: Executor cache (one per kind).
        gate_ids: Only these gates.
        kinds: Only gates of these executors (the server passes :data:`SERVER_EXECUTORS`).
        errors: Where failures that repeat every pass are counted (the poller's own, so
            that one is logged once); default: a fresh one (every failure logged).
    """
    executors = executors or _Executors(settings)
    errors = errors or RepeatedErrors(logger)
    with metrics.timed_pass("poll"):
        with Session(engine, expire_on_commit=False) as session:
            jobs = queue.gates_in_flight(session=session, gate_ids=gate_ids, kinds=kinds)
        refs: dict[str, list[JobRef]] = {}
        for job in jobs:
            if job.job_ref:
                refs.setdefault(job.executor, []).append(JobRef(job.job_ref, job.job_folder or ""))
        states = {}
        for kind, kind_refs in refs.items():
            try:
                states.update(executors.get(kind).poll(kind_refs))
                errors.succeeded(f"poll of {kind} jobs")
            except Exception as exc:
                errors.failed(f"poll of {kind} jobs", exc)
        for job in jobs:
            _poll_one(engine, settings, executors, job, states.get(job.job_ref or ""))
        _cancel_pass(engine, settings, executors, kinds, errors)
    return len(jobs)


def _poll_one(engine: Engine, settings: Settings, executors: _Executors, job: queue.GateJob,
              job_state: JobState | None) -> None:
    """Ingest one gate in its own transaction: whatever one gate's files hold can fail that
    gate, never the pass (STYLE.md section 4)."""
    ended: list[RunEnd] = []
    with Session(engine, expire_on_commit=False) as session:
        try:
            gate = ingest_gate(session=session, gate_id=job.gate_id, data_dir=settings.data_dir,
                               job_state=job_state, executor=executors.get(job.executor), ended=ended)
            state = gate.status if gate is not None else None
            reason = gate.status_reason if gate is not None else None
            session.commit()
        except Exception as exc:
            logger.exception("gate=%s ingest failed", job.gate_id,
                             extra={"event": "gate.ingest_failed", "gate_id": job.gate_id})
            session.rollback()
            _fail(session, job.gate_id, f"ingesting the gate's results failed: {exc!r}")
            state, reason, ended = "failed", f"ingesting the gate's results failed: {exc!r}", []
    for end in ended:
        if end.wall_s is not None:
            metrics.RUN_SECONDS.labels(role=end.role, status=end.status).observe(end.wall_s)
        logger.info("gate=%s run %d (%s) %s in %s s", end.gate_id, end.order, end.role, end.status,
                    "?" if end.wall_s is None else f"{end.wall_s:.3f}",
                    extra={"event": "run.ended", "gate_id": end.gate_id, "run_order": end.order,
                           "role": end.role, "state": end.status, "duration_s": end.wall_s})
    if state in TERMINAL_GATE_STATUSES:
        metrics.GATES_FINISHED.labels(executor=job.executor, state=state).inc()
        logger.info("gate=%s %s%s", job.gate_id, state, f": {reason}" if reason else "",
                    extra={"event": "gate.finished", "gate_id": job.gate_id, "state": state,
                           "executor": job.executor, "reason": reason})


def _fail(session: Session, gate_id: int, reason: str) -> None:
    """Record a failure that the pass itself hit on one gate, then go on with the others."""
    try:
        queue.fail_gate(session=session, gate_id=gate_id, reason=reason)
        session.commit()
    except Exception:
        logger.exception("gate=%s could not be marked failed", gate_id)
        session.rollback()


def _cancel_pass(engine: Engine, settings: Settings, executors: _Executors,
                 kinds: tuple[str, ...] | None = None, errors: RepeatedErrors | None = None) -> None:
    """Cancel the scheduler job of every cancelled gate whose job may still run, and keep
    the steps its runs printed until the driver has stopped."""
    errors = errors or RepeatedErrors(logger)
    with Session(engine, expire_on_commit=False) as session:
        jobs = [j for j in queue.cancelled_gates_with_jobs(session=session)
                if kinds is None or j.executor in kinds]
    for job in jobs:
        paths = GatePaths.of(settings.data_dir, job.gate_id)
        if paths.steps_collected.exists():
            continue
        if not paths.cancel_sent.exists():
            try:
                executors.get(job.executor).cancel(JobRef(job.job_ref or "", job.job_folder or ""))
                paths.cancel_sent.parent.mkdir(parents=True, exist_ok=True)
                paths.cancel_sent.write_text("sent\n")
                logger.info("gate=%s cancelled job %s", job.gate_id, job.job_ref)
                errors.succeeded(f"gate={job.gate_id} cancel of job {job.job_ref}")
            except Exception as exc:
                errors.failed(f"gate={job.gate_id} cancel of job {job.job_ref}", exc)
                continue
        with Session(engine, expire_on_commit=False) as session:
            try:
                collect_steps(session=session, gate_id=job.gate_id, data_dir=settings.data_dir)
                session.commit()
                errors.succeeded(f"gate={job.gate_id} steps of the cancelled runs")
            except Exception as exc:
                errors.failed(f"gate={job.gate_id} steps of the cancelled runs", exc)
                session.rollback()
        status = read_json(paths.status) or {}
        if status.get("state") in ("finished", "failed", "cancelled") or not paths.status.exists():
            try:
                paths.steps_collected.write_text("done\n")
            except OSError as exc:  # a full disk: try again next pass, say so once
                errors.failed(f"gate={job.gate_id} marker {paths.steps_collected.name}", exc)


class Dispatcher(LoopService):
    """Submits queued gates."""

    name = "dispatcher"

    def __init__(self, engine: Engine, settings: Settings, loop_seconds: float = 2.0) -> None:
        super().__init__(loop_seconds)
        self.engine, self.settings = engine, settings
        self.executors = _Executors(settings)

    def run_once(self) -> None:
        """Submit every queued gate the server can run (never ``debug`` ones)."""
        dispatch_pass(self.engine, self.settings, self.executors, kinds=SERVER_EXECUTORS)


class Poller(LoopService):
    """Ingests progress of gates in flight and judges finished ones."""

    name = "poller"

    def __init__(self, engine: Engine, settings: Settings, loop_seconds: float = 2.0) -> None:
        super().__init__(loop_seconds)
        self.engine, self.settings = engine, settings
        self.executors = _Executors(settings)

    def run_once(self) -> None:
        """Ingest every gate in flight that the server runs (``debug`` gates belong to
        the CLI process running them)."""
        poll_pass(self.engine, self.settings, self.executors, kinds=SERVER_EXECUTORS,
                  errors=self.errors)
