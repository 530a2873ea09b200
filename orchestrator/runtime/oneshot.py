"""One re-gate pass outside ``axbgate serve`` (``axbgate regate --once``, for cron or
Slurm's scrontab): take the scheduler lease, check the tracked branches, optionally drive
the submitted gates to the end, deliver notifications, give the lease back.
"""

from __future__ import annotations

import os
import time

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator.domain.errors import Conflict
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.runtime.nightly import (
    LEASE_NAME,
    deliver_webhooks,
    process_finished_gates,
    regate_pass,
)
from orchestrator.schemas.repos import CheckResultPublic
from orchestrator.settings import Settings
from orchestrator.usecases import queue

__all__ = ["run_regate_once"]

_LEASE_S = 600.0
"""Lease length of a one-shot pass, seconds; renewed every --wait round, so a killed pass
blocks a server's scheduler for at most this long."""


def _take_lease(engine: Engine, holder: str) -> bool:
    with Session(engine) as session:
        held = queue.take_lease(session=session, name=LEASE_NAME, holder=holder, duration_s=_LEASE_S)
        session.commit()
    return held


def run_regate_once(engine: Engine, settings: Settings, repo_ids: list[int] | None, *,
                    wait: bool, timeout_s: float, poll_s: float = 1.0) -> list[CheckResultPublic]:
    """Check every (or the named) tracked repository once under the scheduler lease.

    Args:
        engine: Ledger engine.
        settings: Process settings.
        repo_ids: Repositories to check; ``None`` for every enabled one.
        wait: Run the submitted gates in this process (dispatch + poll) and follow
            bisections until none is in flight, then deliver the notifications.
        timeout_s: Longest ``wait``, seconds.
        poll_s: Seconds between two rounds of ``wait``.

    Returns:
        One check result per repository.

    Raises:
        Conflict: Another scheduler holds the lease, takes it over while waiting, or the
            gates are still in flight after ``timeout_s``.
    """
    holder = f"cli:{os.getpid()}"
    if not _take_lease(engine, holder):
        raise Conflict("a running scheduler (axbgate serve) holds the re-gate lease; it checks on "
                       "its schedule, or use POST /repos/{id}/check against it")
    try:
        results = regate_pass(engine, settings, repo_ids)
        if not wait:
            return results
        deadline = time.monotonic() + timeout_s
        ids = repo_ids or [r.repository_id for r in results]
        while True:
            with Session(engine) as session:
                busy = queue.repository_gates_in_flight(session=session, repo_ids=ids)
            if not busy:
                break
            if time.monotonic() > deadline:
                raise Conflict(f"gates {busy} still running after {timeout_s:g} s")
            if not _take_lease(engine, holder):
                raise Conflict("another scheduler took the re-gate lease; stopping this pass")
            dispatch_pass(engine, settings, gate_ids=busy)
            poll_pass(engine, settings, gate_ids=busy)
            process_finished_gates(engine, settings)
            time.sleep(poll_s)
        deliver_webhooks(engine, settings)
        return results
    finally:
        with Session(engine) as session:
            queue.release_lease(session=session, name=LEASE_NAME, holder=holder)
            session.commit()
