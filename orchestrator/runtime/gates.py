"""Dispatcher and poller passes over the ledger (used by ``axbgate serve`` and the CLI)."""

from __future__ import annotations

import logging

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate
from orchestrator.domain.lifecycle import transition
from orchestrator.executors import BaseGateExecutor, JobRef, build_executor
from orchestrator.executors.plan import GatePaths, read_json
from orchestrator.runtime.loop import LoopService
from orchestrator.settings import Settings
from orchestrator.usecases.dispatch import claim_gate, dispatch_gate
from orchestrator.usecases.progress import collect_steps, ingest_gate

__all__ = ["Dispatcher", "Poller", "dispatch_pass", "poll_pass"]

logger = logging.getLogger(__name__)


class _Executors:
    """One executor object per kind, built on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._cache: dict[str, BaseGateExecutor] = {}

    def get(self, kind: str) -> BaseGateExecutor:
        if kind not in self._cache:
            self._cache[kind] = build_executor(
                kind, data_dir=self.settings.data_dir,
                partition=self.settings.executor.slurm_partition,
                account=self.settings.executor.slurm_account,
            )
        return self._cache[kind]


def dispatch_pass(engine: Engine, settings: Settings, executors: _Executors | None = None,
                  gate_ids: list[int] | None = None) -> int:
    """Submit every queued gate (one transaction per gate). Returns how many."""
    executors = executors or _Executors(settings)
    with Session(engine, expire_on_commit=False) as session:
        query = select(Gate.id).where(Gate.status == "queued").order_by(Gate.id)
        if gate_ids is not None:
            query = query.where(Gate.id.in_(gate_ids))
        ids = list(session.scalars(query))
    count = 0
    for gate_id in ids:
        with Session(engine, expire_on_commit=False) as session:
            if not claim_gate(session=session, gate_id=gate_id):
                session.rollback()
                continue
            session.commit()
            gate = session.get(Gate, gate_id)
            try:
                dispatch_gate(session=session, gate=gate, executor=executors.get(gate.executor),
                              data_dir=settings.data_dir)
            except Exception as exc:  # sbatch refused, folder unwritable: fail, do not loop
                logger.exception("gate=%s submit failed", gate_id)
                session.rollback()
                gate = session.get(Gate, gate_id)
                transition(gate, "failed", reason=f"submission failed: {exc}")
            session.commit()
            count += 1
    return count


def poll_pass(engine: Engine, settings: Settings, executors: _Executors | None = None,
              gate_ids: list[int] | None = None) -> int:
    """Ingest every gate in flight; cancel jobs of gates cancelled in the ledger.

    One batched scheduler query per executor kind. Returns gates looked at.
    """
    executors = executors or _Executors(settings)
    with Session(engine, expire_on_commit=False) as session:
        query = select(Gate).where(Gate.status.in_(("submitted", "running"))).order_by(Gate.id)
        if gate_ids is not None:
            query = query.where(Gate.id.in_(gate_ids))
        gates = list(session.scalars(query))
        refs: dict[str, list[JobRef]] = {}
        for g in gates:
            if g.job_ref:
                refs.setdefault(g.executor, []).append(JobRef(g.job_ref, g.job_folder or ""))
        states = {}
        for kind, kind_refs in refs.items():
            try:
                states.update(executors.get(kind).poll(kind_refs))
            except Exception:
                logger.exception("poll of %s jobs failed", kind)
        ids = [(g.id, g.job_ref) for g in gates]
        kinds = {g.id: g.executor for g in gates}
    for gate_id, job_ref in ids:
        # One transaction per gate: whatever one gate's files hold can fail that gate,
        # never the pass (STYLE.md section 4).
        with Session(engine, expire_on_commit=False) as session:
            executor = executors.get(kinds[gate_id])
            try:
                ingest_gate(session=session, gate_id=gate_id, data_dir=settings.data_dir,
                            job_state=states.get(job_ref or ""), executor=executor)
                session.commit()
            except Exception as exc:
                logger.exception("gate=%s ingest failed", gate_id)
                session.rollback()
                _fail_gate(session, gate_id, f"ingesting the gate's results failed: {exc!r}")
    _cancel_pass(engine, settings, executors)
    return len(ids)


def _fail_gate(session: Session, gate_id: int, reason: str) -> None:
    """Record a failure that the pass itself hit on one gate, then go on with the others."""
    try:
        gate = session.get(Gate, gate_id)
        if gate is not None and gate.status not in ("succeeded", "failed", "cancelled"):
            transition(gate, "failed", reason=reason)
            for run in gate.runs:
                if run.status in ("pending", "running"):
                    transition(run, "failed" if run.status == "running" else "skipped", reason=reason)
        session.commit()
    except Exception:
        logger.exception("gate=%s could not be marked failed", gate_id)
        session.rollback()


def _cancel_pass(engine: Engine, settings: Settings, executors: _Executors) -> None:
    """Cancel the scheduler job of every cancelled gate whose job may still run, and keep
    the steps its runs printed until the driver has stopped."""
    with Session(engine, expire_on_commit=False) as session:
        gates = [(g.id, g.executor, g.job_ref, g.job_folder) for g in session.scalars(
            select(Gate).where(Gate.status == "cancelled", Gate.job_ref.is_not(None)))]
    for gate_id, kind, job_ref, job_folder in gates:
        paths = GatePaths.of(settings.data_dir, gate_id)
        if not paths.cancel_sent.exists():
            try:
                executors.get(kind).cancel(JobRef(job_ref, job_folder or ""))
                paths.cancel_sent.parent.mkdir(parents=True, exist_ok=True)
                paths.cancel_sent.write_text("sent\n")
                logger.info("gate=%s cancelled job %s", gate_id, job_ref)
            except Exception:
                logger.exception("gate=%s cancel of job %s failed", gate_id, job_ref)
                continue
        if paths.steps_collected.exists():
            continue
        with Session(engine, expire_on_commit=False) as session:
            try:
                collect_steps(session=session, gate_id=gate_id, data_dir=settings.data_dir)
                session.commit()
            except Exception:
                logger.exception("gate=%s steps of the cancelled runs not stored", gate_id)
                session.rollback()
        status = read_json(paths.status) or {}
        if status.get("state") in ("finished", "failed", "cancelled") or not paths.status.exists():
            paths.steps_collected.write_text("done\n")


class Dispatcher(LoopService):
    """Submits queued gates."""

    name = "dispatcher"

    def __init__(self, engine: Engine, settings: Settings, loop_seconds: float = 2.0) -> None:
        super().__init__(loop_seconds)
        self.engine, self.settings = engine, settings
        self.executors = _Executors(settings)

    def run_once(self) -> None:
        """Submit every queued gate."""
        dispatch_pass(self.engine, self.settings, self.executors)


class Poller(LoopService):
    """Ingests progress of gates in flight and judges finished ones."""

    name = "poller"

    def __init__(self, engine: Engine, settings: Settings, loop_seconds: float = 2.0) -> None:
        super().__init__(loop_seconds)
        self.engine, self.settings = engine, settings
        self.executors = _Executors(settings)

    def run_once(self) -> None:
        """Ingest every gate in flight."""
        poll_pass(self.engine, self.settings, self.executors)
