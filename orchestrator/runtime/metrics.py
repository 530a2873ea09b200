"""Prometheus metrics of the service: the ONE module that defines them (``prometheus-client``).

Counters and histograms are process-wide (the default registry, with the client's process
and platform collectors), updated by the runtime passes: :func:`dispatch_pass` and
:func:`poll_pass` (``runtime/gates.py``), the nightly scheduler and webhook deliveries
(``runtime/nightly.py``). Gauges of the ledger (gates by state, queue depth) are read from
the database at scrape time (:func:`render`), so every API worker reports the same values.

Units follow the Prometheus conventions: seconds, ``_total`` for counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from orchestrator.domain.lifecycle import GateStatus
from orchestrator.usecases import queue

__all__ = [
    "CONTENT_TYPE_LATEST",
    "DISPATCH_SECONDS",
    "GATES",
    "GATES_DISPATCHED",
    "GATES_FINISHED",
    "NIGHTLY_CHECKS",
    "PASS_SECONDS",
    "QUEUE_DEPTH",
    "QUEUE_WAIT_SECONDS",
    "RUN_SECONDS",
    "SCHEDULER_CALLS",
    "SCHEDULER_CALL_SECONDS",
    "WEBHOOK_DELIVERIES",
    "WEBHOOK_FAILURES",
    "InstrumentedExecutor",
    "render",
    "timed_pass",
    "webhook_outcome",
]

# Seconds: a pass over an idle ledger takes milliseconds, a Slurm submission seconds,
# a run minutes to hours.
_FAST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RUN_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0)

GATES = Gauge("axbgate_gates", "Gates in the ledger by state (read at scrape time).", ["state"])
QUEUE_DEPTH = Gauge("axbgate_queue_depth",
                    "Queued gates not yet submitted, by executor (read at scrape time).", ["executor"])
PASS_SECONDS = Histogram("axbgate_pass_seconds",
                         "Duration of one dispatcher or poller pass over the ledger, seconds.",
                         ["pass_name"], buckets=_FAST_BUCKETS)
DISPATCH_SECONDS = Histogram("axbgate_dispatch_seconds",
                             "Time to claim, plan and submit one gate (the dispatch latency), seconds.",
                             ["executor"], buckets=_FAST_BUCKETS)
QUEUE_WAIT_SECONDS = Histogram("axbgate_queue_wait_seconds",
                               "Time a gate waited between its submission to axbgate and its job "
                               "submission, seconds.", ["executor"], buckets=_RUN_BUCKETS)
GATES_DISPATCHED = Counter("axbgate_gates_dispatched",
                           "Gates the dispatcher handled, by outcome: submitted, or failed (executor "
                           "'unknown' when the submission itself raised).",
                           ["executor", "outcome"])
GATES_FINISHED = Counter("axbgate_gates_finished",
                         "Gates the poller saw reach a final state, by state.", ["executor", "state"])
RUN_SECONDS = Histogram("axbgate_run_seconds",
                        "Wall time of a run on its allocation (launch to exit, as the driver "
                        "measured it), seconds, by role (A, X, B) and final status.",
                        ["role", "status"], buckets=_RUN_BUCKETS)
SCHEDULER_CALLS = Counter("axbgate_scheduler_calls",
                          "Calls to the job scheduler (sbatch/sacct/scancel for slurm, process "
                          "calls for local), by executor, call and outcome.",
                          ["executor", "call", "outcome"])
SCHEDULER_CALL_SECONDS = Histogram("axbgate_scheduler_call_seconds",
                                   "Duration of one scheduler call, seconds.", ["executor", "call"],
                                   buckets=_FAST_BUCKETS)
WEBHOOK_DELIVERIES = Counter("axbgate_webhook_deliveries",
                             "Webhook delivery attempts by outcome (delivered, retry, failed, refused).",
                             ["outcome"])
WEBHOOK_FAILURES = Counter("axbgate_webhook_failures",
                           "Webhook delivery attempts that did not deliver (retry, failed, refused).")
NIGHTLY_CHECKS = Counter("axbgate_nightly_checks",
                         "Re-gate checks of tracked repositories run by the nightly scheduler or "
                         "`axbgate regate --once`, by outcome (ok, failed).", ["outcome"])


@contextmanager
def timed_pass(name: str) -> Iterator[None]:
    """Observe the duration of one pass (``dispatch``, ``poll``, ``nightly``) in seconds."""
    start = time.perf_counter()
    try:
        yield
    finally:
        PASS_SECONDS.labels(pass_name=name).observe(time.perf_counter() - start)


def webhook_outcome(outcome: str) -> None:
    """Count one webhook attempt (``delivered``, ``retry``, ``failed`` or ``refused``)."""
    WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()
    if outcome != "delivered":
        WEBHOOK_FAILURES.inc()


class InstrumentedExecutor:
    """An executor whose ``submit``/``poll``/``cancel`` calls are counted and timed.

    Every other attribute (``kind``, ``reap``, ...) is the wrapped executor's.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.kind = inner.kind

    def _call(self, call: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        outcome = "error"
        try:
            result = fn(*args)
            outcome = "ok"
            return result
        finally:
            SCHEDULER_CALLS.labels(executor=self.kind, call=call, outcome=outcome).inc()
            SCHEDULER_CALL_SECONDS.labels(executor=self.kind, call=call).observe(time.perf_counter() - start)

    def submit(self, *args: Any) -> Any:
        """The wrapped executor's ``submit``, counted."""
        return self._call("submit", self._inner.submit, *args)

    def poll(self, refs: Sequence[Any]) -> Any:
        """The wrapped executor's ``poll``, counted."""
        return self._call("poll", self._inner.poll, refs)

    def cancel(self, ref: Any) -> Any:
        """The wrapped executor's ``cancel``, counted."""
        return self._call("cancel", self._inner.cancel, ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def render(engine: Engine) -> bytes:
    """The text exposition of every metric, with the ledger gauges read now.

    Args:
        engine: Ledger engine (one read transaction: counts by state and queued gates).

    Returns:
        The Prometheus text format (``CONTENT_TYPE_LATEST``), UTF-8 bytes.
    """
    with Session(engine) as session:
        by_state = queue.gate_counts(session=session)
        queued = queue.queue_depth(session=session)
    for state in GateStatus:
        GATES.labels(state=state.value).set(by_state.get(state.value, 0))
    QUEUE_DEPTH.clear()
    for executor, count in queued.items():
        QUEUE_DEPTH.labels(executor=executor).set(count)
    return generate_latest(REGISTRY)
