"""A background loop: one idempotent pass every ``loop_seconds`` on a thread."""

from __future__ import annotations

import abc
import logging
import threading

__all__ = ["LoopService"]

logger = logging.getLogger(__name__)


class LoopService(abc.ABC):
    """Base of the dispatcher and poller: ``start()``/``stop()`` around ``run_once()``."""

    name = "loop"

    def __init__(self, loop_seconds: float) -> None:
        self.loop_seconds = loop_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def run_once(self) -> None:
        """One idempotent pass."""

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:  # a failed pass is logged; the next pass retries
                logger.exception("service=%s pass failed", self.name)
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
