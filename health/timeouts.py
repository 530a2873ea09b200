"""The single hard-timeout mechanism of the health gate (DESIGN.md section 4).

Two halves, both here so there is one definition of "hang":

- ``StageWatchdog`` runs inside every rank. Each stage (rendezvous, correctness,
  bandwidth, ...) is entered with a deadline; if the stage is still running when the
  deadline passes, a watchdog thread dumps every thread's Python stack with
  ``faulthandler``, hands a ``HangRecord`` to a callback (which stores it), and ends
  the process with ``EXIT_HANG``. ``os._exit`` is used on purpose: a rank blocked in
  a collective cannot be unwound, and Slurm's ``--kill-on-bad-exit`` or the local
  supervisor then ends the other ranks.
- ``supervise`` runs in the local launcher. It waits for the rank processes with an
  overall deadline; as soon as one rank exits non-zero (a hang or a crash) or the
  deadline passes, it asks every rank still alive for a stack dump (SIGUSR1, handled
  by ``faulthandler.register`` in C, so it works while the GIL is held) and then
  kills them.

Exit statuses (``health.cli`` uses the same): 0 healthy or degraded, 1 failed,
2 usage error, 3 hang.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import logging
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_HANG = 3
STACK_DUMP_SIGNAL = signal.SIGUSR1


@dataclasses.dataclass(frozen=True)
class HangRecord:
    """A stage that outlived its deadline."""

    stage: str
    rank: int
    host: str
    deadline_s: float
    stack_dump: str
    """All Python thread stacks of the rank at the deadline (faulthandler format)."""
    detected_by: str = "watchdog"
    """``watchdog`` (the rank's own) or ``supervisor`` (the launcher's overall deadline)."""


@dataclasses.dataclass(frozen=True)
class RankExit:
    """How one supervised rank process ended."""

    rank: int
    pid: int
    returncode: int | None
    """Exit status; negative = killed by that signal (subprocess convention)."""
    terminated: bool
    """True when the supervisor ended it."""
    stack_dump: str = ""
    """Stacks dumped on the supervisor's SIGUSR1, if any."""


def _dump_all_stacks() -> str:
    with tempfile.TemporaryFile(mode="w+") as fh:
        faulthandler.dump_traceback(file=fh, all_threads=True)
        fh.flush()
        fh.seek(0)
        return fh.read()


class StageWatchdog:
    """Per-rank stage deadlines that turn a hang into ``EXIT_HANG`` with a stack dump."""

    def __init__(
        self,
        *,
        rank: int,
        host: str,
        on_hang: Callable[[HangRecord], None],
        exit_process: bool = True,
    ) -> None:
        """Create a watchdog.

        Args:
            rank: global rank, stored in the record.
            host: hostname, stored in the record.
            on_hang: called once, from the watchdog thread, with the record; it must
                persist the record (file, stdout record line) and return quickly.
            exit_process: end the process with ``EXIT_HANG`` after ``on_hang``; False
                only for callers that handle the hang themselves (the flag exists for
                in-process use where exiting would kill the caller).
        """
        self._rank = rank
        self._host = host
        self._on_hang = on_hang
        self._exit = exit_process
        self.fired: HangRecord | None = None

    @contextlib.contextmanager
    def stage(self, name: str, deadline_s: float) -> Iterator[None]:
        """Run the body under a hard deadline.

        Args:
            name: stage name (``rendezvous``, ``correctness``, ...).
            deadline_s: seconds the body may take.

        Yields:
            Nothing; the body runs while the watchdog waits.

        Raises:
            ValueError: if ``deadline_s`` is not positive.
        """
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        done = threading.Event()

        def watch() -> None:
            if done.wait(deadline_s):
                return
            record = HangRecord(name, self._rank, self._host, deadline_s, _dump_all_stacks())
            self.fired = record
            logger.error("stage=%s rank=%d hang after %.1f s", name, self._rank, deadline_s)
            try:
                self._on_hang(record)
            finally:
                if self._exit:
                    os._exit(EXIT_HANG)

        thread = threading.Thread(target=watch, name=f"watchdog-{name}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()


def enable_stack_dump_signal(path: Path) -> None:
    """Make ``STACK_DUMP_SIGNAL`` dump all stacks of this process into ``path``.

    Args:
        path: file the dump is appended to (kept open for the process lifetime).
    """
    fh = open(path, "a")  # noqa: SIM115 - must outlive this call for faulthandler
    faulthandler.register(STACK_DUMP_SIGNAL, file=fh, all_threads=True, chain=False)


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def terminate_ranks(
    procs: Sequence[subprocess.Popen[bytes]], dump_wait_s: float = 1.0, kill_wait_s: float = 3.0
) -> set[int]:
    """Ask live ranks for stack dumps, then end them (SIGTERM, then SIGKILL).

    Args:
        procs: rank processes, index = rank.
        dump_wait_s: seconds to give faulthandler to write after SIGUSR1.
        kill_wait_s: seconds between SIGTERM and SIGKILL.

    Returns:
        Ranks that were still alive and got terminated.
    """
    live = {r for r, p in enumerate(procs) if _alive(p)}
    for r in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(procs[r].pid, STACK_DUMP_SIGNAL)
    if live:
        time.sleep(dump_wait_s)
    for r in live:
        with contextlib.suppress(ProcessLookupError):
            procs[r].terminate()
    end = time.monotonic() + kill_wait_s
    for r in live:
        try:
            procs[r].wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            procs[r].kill()
            procs[r].wait()
    return live


def supervise(
    procs: Sequence[subprocess.Popen[bytes]],
    *,
    deadline_s: float,
    dump_paths: Sequence[Path],
    poll_s: float = 0.05,
) -> tuple[list[RankExit], bool]:
    """Wait for rank processes under an overall hard deadline.

    Args:
        procs: rank processes, index = rank; each called ``enable_stack_dump_signal``
            with the matching ``dump_paths`` entry.
        deadline_s: seconds all ranks together may take.
        dump_paths: per-rank stack-dump files.
        poll_s: polling period, s.

    Returns:
        (one ``RankExit`` per rank, True when the overall deadline expired).
    """
    end = time.monotonic() + deadline_s
    timed_out = False
    while any(_alive(p) for p in procs):
        if any(p.returncode not in (None, 0) for p in procs):
            bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode not in (None, 0)]
            logger.error("rank exit %s: terminating the other ranks", bad)
            break
        if time.monotonic() > end:
            timed_out = True
            logger.error("health gate overall deadline %.1f s expired", deadline_s)
            break
        time.sleep(poll_s)
    terminated = terminate_ranks(procs)
    exits = []
    for r, p in enumerate(procs):
        dump = ""
        path = dump_paths[r]
        if path.exists():
            dump = path.read_text(errors="replace")
        exits.append(RankExit(r, p.pid, p.returncode, r in terminated, dump))
    return exits, timed_out
