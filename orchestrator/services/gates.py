"""Dispatcher and poller passes over the ledger (used by ``axbgate serve`` and the CLI)."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate
from orchestrator.executors import BaseGateExecutor, JobRef, build_executor
from orchestrator.ingest import claim_gate, dispatch_gate, ingest_gate
from orchestrator.lifecycle import transition
from orchestrator.services.loop import LoopService
from orchestrator.settings import Settings

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
    for gate_id, job_ref in ids:
        with Session(engine, expire_on_commit=False) as session:
            gate = session.get(Gate, gate_id)
            ingest_gate(session=session, gate=gate, data_dir=settings.data_dir,
                        job_state=states.get(job_ref or ""), executor=executors.get(gate.executor))
            session.commit()
    _cancel_pass(engine, settings, executors)
    return len(ids)


def _cancel_pass(engine: Engine, settings: Settings, executors: _Executors) -> None:
    """Cancel the scheduler job of every cancelled gate whose job may still run."""
    with Session(engine, expire_on_commit=False) as session:
        gates = list(session.scalars(select(Gate).where(Gate.status == "cancelled",
                                                       Gate.job_ref.is_not(None))))
        for gate in gates:
            marker = Path(settings.data_dir) / "gates" / f"{gate.id:06d}" / "cancel-sent"
            if marker.exists():
                continue
            try:
                executors.get(gate.executor).cancel(JobRef(gate.job_ref, gate.job_folder or ""))
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text("sent\n")
                logger.info("gate=%s cancelled job %s", gate.id, gate.job_ref)
            except Exception:
                logger.exception("gate=%s cancel of job %s failed", gate.id, gate.job_ref)


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
