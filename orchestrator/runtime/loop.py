"""A background loop: one idempotent pass every ``loop_seconds`` on a thread, and the
logging of errors that repeat every pass (once, with a count)."""

from __future__ import annotations

import abc
import logging
import threading
import time

__all__ = ["LoopService", "RepeatedErrors"]

logger = logging.getLogger(__name__)


class RepeatedErrors:
    """Logs an error that recurs every pass once, with a count, instead of every pass.

    The first occurrence of an error at a site (same exception type and message) is
    logged with its traceback; identical ones after it are counted; when the site
    succeeds again or fails differently, one line says how often and for how long it
    repeated. A site still failing after ``remind_s`` seconds is reported once more.

    Args:
        log: Where the lines go.
        remind_s: Seconds between reminders of an error that keeps repeating.
    """

    def __init__(self, log: logging.Logger, remind_s: float = 600.0) -> None:
        self.log, self.remind_s = log, remind_s
        self._lock = threading.Lock()
        self._open: dict[str, list] = {}  # site -> [key, count, first monotonic, last reminder]

    def failed(self, site: str, exc: BaseException, **extra) -> None:
        """Record that ``site`` (e.g. ``"poller pass"``) raised ``exc`` in this pass."""
        key = (type(exc).__name__, str(exc))
        now = time.monotonic()
        with self._lock:
            seen = self._open.get(site)
            if seen is not None and seen[0] == key:
                seen[1] += 1
                if now - seen[3] < self.remind_s:
                    return
                seen[3] = now
                self.log.error("%s still failing: %s: %s (%d times in %.0f s)", site, key[0], key[1],
                               seen[1], now - seen[2], extra={"event": "error.repeating", **extra})
                return
            self._summary(site)
            self._open[site] = [key, 1, now, now]
        self.log.error("%s failed: %s: %s (logged once; repeats are counted)", site, key[0], key[1],
                       exc_info=exc, extra={"event": "error.first", **extra})

    def succeeded(self, site: str) -> None:
        """Record that ``site`` passed: a repeated error it had is summed up once."""
        with self._lock:
            self._summary(site)

    def _summary(self, site: str) -> None:
        seen = self._open.pop(site, None)
        if seen is not None and seen[1] > 1:
            self.log.warning("%s: the error %s: %s repeated %d times over %.0f s", site, seen[0][0],
                             seen[0][1], seen[1], time.monotonic() - seen[2],
                             extra={"event": "error.repeated", "count": seen[1]})


class LoopService(abc.ABC):
    """Base of the dispatcher and poller: ``start()``/``stop()`` around ``run_once()``."""

    name = "loop"

    def __init__(self, loop_seconds: float) -> None:
        self.loop_seconds = loop_seconds
        self.errors = RepeatedErrors(logger)
        """Errors of this service's passes, logged once per repetition (with a count)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def run_once(self) -> None:
        """One idempotent pass."""

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
                self.errors.succeeded(f"service={self.name} pass")
            except Exception as exc:  # a failed pass is logged once; the next pass retries
                self.errors.failed(f"service={self.name} pass", exc)
            self._stop.wait(self.loop_seconds)

    def start(self) -> None:
        """Start the loop thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"axbgate-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Ask the loop to stop and wait for the current pass."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
