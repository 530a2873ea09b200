"""The nightly re-gate scheduler inside ``axbgate serve`` (issue 7).

* APScheduler 3 (``BackgroundScheduler``) with its ``SQLAlchemyJobStore`` on the ledger
  database: one job per enabled tracked repository (its cron schedule, or every
  ``nightly.interval_seconds`` when the time-compressed trigger is set). Job state
  survives restarts; a run missed while the service was down fires once on start
  (``coalesce``, no misfire limit).
* Exactly one scheduler: a lease row (``scheduler_leases``, name ``nightly``) taken and
  renewed with one conditional UPDATE every ``loop_seconds``. Only the holder starts
  APScheduler and runs the housekeeping; other API workers stay idle and take over when
  the holder stops renewing for ``lease_seconds``.
* Housekeeping pass (the holder, every ``loop_seconds``): sync jobs with the tracked
  repositories, process finished re-gate/bisection gates (``regate.on_gate_finished``,
  once per gate) and deliver due webhooks. Every step catches and logs its errors.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import uuid
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator.runtime import metrics
from orchestrator.runtime.loop import LoopService
from orchestrator.schemas.repos import CheckResultPublic
from orchestrator.settings import Settings
from orchestrator.usecases import queue
from orchestrator.usecases.notify import deliver_due
from orchestrator.usecases.regate import check_repository, on_gate_finished

__all__ = [
    "LEASE_NAME",
    "NightlyScheduler",
    "build_trigger",
    "deliver_webhooks",
    "process_finished_gates",
    "regate_pass",
    "run_scheduled_check",
]

logger = logging.getLogger(__name__)

LEASE_NAME = "nightly"
_ACTIVE: NightlyScheduler | None = None
"""The scheduler whose APScheduler runs in this process (jobs look it up by name, since
the persisted job can only reference an importable function)."""


def build_trigger(schedule: str, settings: Settings) -> Any:
    """The APScheduler trigger of a repository: its cron (UTC) or the compressed interval.

    Raises:
        ValueError: The cron expression does not parse.
    """
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    if settings.nightly.interval_seconds:
        return IntervalTrigger(seconds=settings.nightly.interval_seconds, timezone=dt.UTC)
    return CronTrigger.from_crontab(schedule, timezone=dt.UTC)


def process_finished_gates(engine: Engine, settings: Settings) -> int:
    """Process every finished, unprocessed re-gate and bisection gate (one transaction each).

    Returns:
        Number of gates processed in this pass.
    """
    with Session(engine) as session:
        ids = queue.finished_regates_to_process(session=session)
    count = 0
    for gate_id in ids:
        try:
            with Session(engine, expire_on_commit=False) as session:
                if on_gate_finished(session=session, gate_id=gate_id, settings=settings) is not None:
                    count += 1
                session.commit()
        except Exception:  # one bad gate must not stop the others (retried next pass)
            logger.exception("gate=%s: processing the re-gate outcome failed", gate_id)
    return count


def deliver_webhooks(engine: Engine, settings: Settings, transport: Any = None) -> int:
    """Deliver due webhooks, counting each attempt in
    :data:`~orchestrator.runtime.metrics.WEBHOOK_DELIVERIES` (``transport``: tests).

    Returns:
        Number of attempts made.
    """
    return deliver_due(engine=engine, settings=settings, transport=transport,
                       on_attempt=metrics.webhook_outcome)


def check_one(engine: Engine, settings: Settings, repo_id: int) -> CheckResultPublic:
    """Check one tracked branch in its own transaction; an error becomes a ``check_failed``
    result (logged, counted in :data:`~orchestrator.runtime.metrics.NIGHTLY_CHECKS`)."""
    try:
        with Session(engine, expire_on_commit=False) as session:
            result = check_repository(session=session, repo_id=repo_id, settings=settings)
            session.commit()
    except Exception as exc:
        logger.exception("repo=%s: check failed", repo_id,
                         extra={"event": "repo.check_failed", "repo_id": repo_id})
        result = CheckResultPublic(repository_id=repo_id, action="check_failed",
                                   message=f"{type(exc).__name__}: {exc}"[:500])
    metrics.NIGHTLY_CHECKS.labels(outcome="failed" if result.action == "check_failed" else "ok").inc()
    logger.info("repo=%s check: %s %s", repo_id, result.action, result.message,
                extra={"event": "repo.checked", "repo_id": repo_id, "action": result.action,
                       "gate_id": result.gate_id, "head_sha": result.head_sha})
    return result


def regate_pass(engine: Engine, settings: Settings, repo_ids: list[int] | None = None) -> list[CheckResultPublic]:
    """One full pass: process finished gates, check branches, deliver webhooks.

    Used by ``axbgate regate --once``.

    Args:
        engine: Ledger engine.
        settings: Service settings.
        repo_ids: Repositories to check (default: every enabled one).

    Returns:
        One check result per repository checked.
    """
    process_finished_gates(engine, settings)
    if repo_ids is None:
        with Session(engine) as session:
            repo_ids = list(queue.enabled_repository_schedules(session=session))
    results = [check_one(engine, settings, rid) for rid in repo_ids]
    deliver_webhooks(engine, settings)
    return results


def run_scheduled_check(repo_id: int) -> None:
    """APScheduler job: check one repository through the active scheduler of this process."""
    service = _ACTIVE
    if service is None or not service.is_leader:
        logger.warning("repo=%s: scheduled check fired without an active lease holder; skipped", repo_id)
        return
    service.check(repo_id)


class NightlyScheduler(LoopService):
    """Lease-guarded APScheduler plus the housekeeping loop."""

    name = "nightly"

    def __init__(self, engine: Engine, settings: Settings, *, holder: str | None = None) -> None:
        super().__init__(settings.nightly.loop_seconds)
        self.engine, self.settings = engine, settings
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.is_leader = False
        self._scheduler: Any = None
        self._lock = threading.Lock()

    # -- lease -------------------------------------------------------------------------
    def _renew_lease(self) -> bool:
        try:
            with Session(self.engine) as session:
                held = queue.take_lease(session=session, name=LEASE_NAME, holder=self.holder,
                                        duration_s=self.settings.nightly.lease_seconds)
                session.commit()
        except Exception:
            logger.exception("scheduler=%s: lease renewal failed", self.holder)
            held = False
        if held != self.is_leader:
            logger.info("scheduler=%s %s the lease", self.holder, "took" if held else "lost")
        self.is_leader = held
        return held

    # -- APScheduler -------------------------------------------------------------------
    def _start_scheduler(self) -> None:
        global _ACTIVE
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=self.engine, tablename="apscheduler_jobs")},
            executors={"default": ThreadPoolExecutor(max_workers=1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone=dt.UTC,
        )
        _ACTIVE = self
        scheduler.start()
        self._scheduler = scheduler
        logger.info("scheduler=%s APScheduler started with %d persisted jobs", self.holder,
                    len(scheduler.get_jobs()))

    def _stop_scheduler(self) -> None:
        global _ACTIVE
        if self._scheduler is not None:
            try:
                self._scheduler.shutdown(wait=True)
            except Exception:
                logger.exception("scheduler=%s: APScheduler shutdown failed", self.holder)
            self._scheduler = None
        if _ACTIVE is self:
            _ACTIVE = None

    def sync_jobs(self) -> None:
        """Make the persisted jobs match the enabled repositories and their schedules."""
        scheduler = self._scheduler
        if scheduler is None:
            return
        with Session(self.engine) as session:
            repos = queue.enabled_repository_schedules(session=session)
        wanted = {f"repo-{rid}": (rid, schedule) for rid, schedule in repos.items()}
        for job in scheduler.get_jobs():
            if job.id not in wanted:
                scheduler.remove_job(job.id)
                logger.info("scheduler=%s removed job %s", self.holder, job.id)
        for job_id, (rid, schedule) in wanted.items():
            trigger = build_trigger(schedule, self.settings)
            job = scheduler.get_job(job_id)
            if job is None:
                scheduler.add_job(run_scheduled_check, trigger, args=[rid], id=job_id,
                                  name=f"re-gate check of repository {rid}", replace_existing=True)
                logger.info("scheduler=%s added job %s (%s)", self.holder, job_id, trigger)
            elif str(job.trigger) != str(trigger):
                scheduler.reschedule_job(job_id, trigger=trigger)
                logger.info("scheduler=%s rescheduled job %s (%s)", self.holder, job_id, trigger)

    def check(self, repo_id: int) -> CheckResultPublic | None:
        """Check one repository (serialized with the housekeeping pass)."""
        with self._lock:
            return check_one(self.engine, self.settings, repo_id)

    # -- loop --------------------------------------------------------------------------
    def run_once(self) -> None:
        """Renew the lease; as holder run APScheduler and one housekeeping pass."""
        leader = self._renew_lease()
        if not leader:
            if self._scheduler is not None:
                self._stop_scheduler()
            return
        if self._scheduler is None:
            self._start_scheduler()
        for step in (self.sync_jobs, self._process, self._deliver):
            try:
                step()
            except Exception:  # the next pass retries; the scheduler keeps running
                logger.exception("scheduler=%s: %s failed", self.holder, step.__name__)

    def _process(self) -> None:
        with self._lock, metrics.timed_pass("nightly"):
            count = process_finished_gates(self.engine, self.settings)
        if count:
            logger.info("scheduler=%s processed %d finished re-gates", self.holder, count,
                        extra={"event": "nightly.processed", "count": count})

    def _deliver(self) -> None:
        deliver_webhooks(self.engine, self.settings)

    def stop(self) -> None:
        """Stop the loop and APScheduler, then give the lease up so a successor starts at once."""
        super().stop()
        self._stop_scheduler()
        if self.is_leader:
            try:
                with Session(self.engine) as session:
                    queue.release_lease(session=session, name=LEASE_NAME, holder=self.holder)
                    session.commit()
            except Exception:
                logger.exception("scheduler=%s: releasing the lease failed", self.holder)
            self.is_leader = False
