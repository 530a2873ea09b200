"""Process handling of the allocation driver, apart from the gate's phases.

One step (a health gate or a run) is a child process in its own session: its output is
pumped into the run log (capped at ``max_log_bytes``) and, line by line, into a consumer
(the record parser); it has a deadline; on cancel or deadline its whole process group is
stopped (SIGTERM, then SIGKILL after a grace period); whatever it leaves behind in its
group dies with it. The group id is kept in the gate folder so that the executor can reap
it if the driver itself is killed outright.
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.domain.record_limits import MAX_RECORD_LINE_BYTES

__all__ = ["Cancelled", "StepResult", "kill_group", "prepare_run_as", "reap_active_step", "run_step"]

_KILL_GRACE_S = 10.0
_POLL_S = 0.25
_TAIL_BYTES = 20000
_HINTS = (  # (pattern in the log tail, what the step's error adds)
    (re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE), "out of memory"),
    (re.compile(r"connectFullMesh failed.*?remote=\[(127\.[0-9.]+)\]"),
     "gloo could not connect its ranks: a peer listened on loopback {0}; a hosts file maps the "
     "node's name there (set GLOO_SOCKET_IFNAME: the launch preamble does)"),
    (re.compile(r"srun: error: ([\w.-]+): (tasks? [0-9,-]+): (Killed|Segmentation fault|Aborted|"
                r"Exited with exit code \d+)"), "first failure: {1} on node {0}: {2}"),
    (re.compile(r"connectFullMesh failed"), "gloo could not connect its ranks (connectFullMesh)"),
)


class Cancelled(Exception):
    """The allocation was asked to stop (scancel, Ctrl-C, time-limit warning)."""


def kill_group(pgid: int) -> None:
    """SIGKILL a process group if any member is left (no error if it is gone)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap_active_step(pgid_file: Path) -> bool:
    """Kill the process group of a gate's running step after its driver died.

    Args:
        pgid_file: The gate folder's ``active-step.pgid`` (``GatePaths.active_pgid``).

    Returns:
        True if a process group was signalled.
    """
    try:
        pgid = int(Path(pgid_file).read_text().strip())
    except (FileNotFoundError, ValueError):
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
        killed = True
    except (ProcessLookupError, PermissionError):
        killed = False
    Path(pgid_file).unlink(missing_ok=True)
    return killed


def prepare_run_as(user: str | None, paths) -> dict[str, str]:
    """Make a gate folder usable by the account its steps run as.

    The run-time folders (runs, compile cache, a private ``HOME``) are handed to ``user``;
    a probe step checks that ``user`` can start this interpreter and reach the gate folder.

    Args:
        user: Account name (``security.run_as_user``) or ``None`` (nothing to do).
        paths: The gate's :class:`~orchestrator.executors.plan.GatePaths`.

    Returns:
        ``HOME``, ``USER`` and ``LOGNAME`` of the steps (empty without ``user``).

    Raises:
        RuntimeError: The driver cannot switch users (not root) or ``user`` cannot reach
            the gate folder; the message says what to change.
    """
    if not user:
        return {}
    entry = pwd.getpwnam(user)
    if os.geteuid() != 0:
        raise RuntimeError(f"security.run_as_user={user} needs the server (and so the driver) "
                           "to run as root to switch users")
    for folder in (paths.runs_dir, paths.compile_cache, paths.run_home):
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    probe = subprocess.run(["test", "-w", str(paths.runs_dir)], user=entry.pw_uid, group=entry.pw_gid,
                           extra_groups=[], env={"PATH": os.defpath}, capture_output=True, timeout=60,
                           check=False)
    if probe.returncode != 0:
        raise RuntimeError(
            f"security.run_as_user={user} cannot reach {paths.runs_dir}: make the data directory and "
            "its parents traversable for that account (chmod o+x)")
    return {"HOME": str(paths.run_home), "USER": user, "LOGNAME": user}


class _LogPump(threading.Thread):
    """Copies a step's output pipe into its log, up to ``max_bytes`` (then drains), and
    hands every complete line (raw bytes, without its newline) to ``on_line``. A line
    longer than ``max_line_bytes`` is handed over cut to ``max_line_bytes + 1`` bytes
    (so the consumer sees it is too long) and the rest of it is dropped: one endless
    line never grows the pump's memory."""

    def __init__(self, pipe, log, max_bytes: int, on_line: Callable[[bytes], None] | None,
                 max_line_bytes: int = MAX_RECORD_LINE_BYTES) -> None:
        super().__init__(daemon=True, name="axbgate-log-pump")
        self.pipe, self.log, self.max_bytes, self.on_line = pipe, log, max_bytes, on_line
        self.max_line_bytes = max_line_bytes
        self.overflowed = threading.Event()
        self.consumer_error: BaseException | None = None
        self._skipping = False

    def _deliver(self, line: bytes) -> None:
        try:
            self.on_line(line[:-1] if line.endswith(b"\r") else line)  # type: ignore[misc]
        except BaseException as exc:  # a consumer bug must not stop the pump
            self.consumer_error = exc

    def _lines(self, data: bytes, pending: bytearray) -> None:
        if self.on_line is None:
            return
        start = 0
        while self.consumer_error is None:
            cut = data.find(b"\n", start)
            piece = data[start:] if cut < 0 else data[start:cut]
            if self._skipping:  # the rest of an over-long line
                self._skipping = cut < 0
            else:
                room = self.max_line_bytes + 1 - len(pending)
                if room > 0:
                    pending += piece[:room]
                if cut >= 0 or len(pending) > self.max_line_bytes:
                    self._deliver(bytes(pending))
                    pending.clear()
                    self._skipping = cut < 0
            if cut < 0:
                return
            start = cut + 1

    def run(self) -> None:
        written = 0
        pending = bytearray()
        while chunk := self.pipe.read1(1 << 16):
            if written + len(chunk) > self.max_bytes:
                if not self.overflowed.is_set():
                    head = chunk[: max(0, self.max_bytes - written)]
                    self.log.write(head)
                    self.log.write(b"\n# axbgate: output truncated at max_log_bytes\n")
                    self._lines(head, pending)
                    self.overflowed.set()
                continue  # keep draining so the step never blocks on a full pipe
            self.log.write(chunk)
            written += len(chunk)
            self._lines(chunk, pending)
        if pending and not self.overflowed.is_set() and self.consumer_error is None:
            self._deliver(bytes(pending))
        self.pipe.close()


class StepResult:
    """How one step ended: exit code (None if it never ran), error text, wall seconds."""

    __slots__ = ("exit_code", "error", "wall_s")

    def __init__(self, exit_code: int | None, error: str | None, wall_s: float) -> None:
        self.exit_code, self.error, self.wall_s = exit_code, error, wall_s


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM the child's group, SIGKILL it after the grace period."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + _KILL_GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if child.poll() is None:
        kill_group(child.pid)


def run_step(argv: list[str], *, env: dict[str, str], cwd: Path, log_path: Path,
             deadline_s: float, max_log_bytes: int, pgid_file: Path,
             cancel_reason: Callable[[], str | None],
             on_line: Callable[[bytes], None] | None = None,
             spawn: Callable[[], Any] | None = None,
             run_as: str | None = None) -> StepResult:
    """Run one step to its end, its deadline or a cancel.

    Args:
        argv: Program and arguments (never a shell string).
        env: Complete environment of the step.
        cwd: Working directory.
        log_path: Raw output (stdout and stderr) is appended here.
        deadline_s: Wall-clock limit, seconds.
        max_log_bytes: Output limit, bytes; past it the step is killed.
        pgid_file: Where the step's process group id is kept while it runs.
        cancel_reason: Returns a reason once the allocation was asked to stop.
        on_line: Called with every complete output line (raw bytes, no newline) while the
            step runs; lines past ``MAX_RECORD_LINE_BYTES`` come cut to that length + 1.
        spawn: Starts the step some other way than ``Popen(argv)`` (the trainer's fork
            server); returns a child with ``pid`` (heading its process group),
            ``stdout`` (a binary reader), ``poll()`` and ``wait()``. ``argv`` is then only
            written to the log.
        run_as: Account a ``Popen`` step runs as (uid, primary gid, no supplementary groups);
            ``None`` keeps the driver's.

    Returns:
        The :class:`StepResult`; ``error`` names a deadline, output overflow, signal or
        non-zero exit (with ``(out of memory)`` when the log tail says so).

    Raises:
        Cancelled: ``cancel_reason`` returned a reason before or while the step ran.
    """
    if cancel_reason():
        raise Cancelled(cancel_reason())
    start = time.monotonic()
    overflow = f"wrote more than {max_log_bytes} bytes of output and was killed (max_log_bytes)"
    with open(log_path, "ab", buffering=0) as log:
        log.write(f"# axbgate step: {argv!r}\n".encode())
        if spawn is None:
            ids = {}
            if run_as:
                entry = pwd.getpwnam(run_as)
                ids = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            try:
                child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, **ids)
            except OSError as exc:  # missing program, no permission (run_as_user): the step fails
                message = f"could not start {argv[0]}" + (f" as {run_as}" if run_as else "") + f": {exc}"
                log.write(f"# axbgate: {message}\n".encode())
                return StepResult(None, message, time.monotonic() - start)
        else:
            child = spawn()
        pgid_file.write_text(f"{child.pid}\n")
        pump = _LogPump(child.stdout, log, max_log_bytes, on_line)
        pump.start()
        error = None
        while child.poll() is None:
            if pump.overflowed.is_set():
                error = overflow
            elif time.monotonic() - start > deadline_s:
                error = f"exceeded its deadline of {deadline_s:g} s and was killed"
            if error or cancel_reason():
                _stop(child)
                break
            time.sleep(_POLL_S)
        code = child.wait()
        # Whatever the step left behind in its process group (a forked helper, a
        # torchrun worker) dies with it, so nothing outlives the run it belongs to.
        kill_group(child.pid)
        pump.join(timeout=30)
        if error is None and pump.overflowed.is_set():
            error = overflow
        pgid_file.unlink(missing_ok=True)
    wall = time.monotonic() - start
    if cancel_reason():
        raise Cancelled(cancel_reason())
    if error is None and code != 0:
        error = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        with open(log_path, "rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - _TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
        for pattern, hint in _HINTS:
            if match := pattern.search(tail):
                error += f" ({hint.format(*match.groups())})"
                break
    return StepResult(code, error, wall)
