"""Process handling of the allocation driver, apart from the gate's phases.

One step (a health gate or a run) is a child process in its own session: its output is
pumped into the run log (capped at ``max_log_bytes``) and, line by line, into a consumer
(the record parser); it has a deadline; on cancel or deadline its whole process group is
stopped (SIGTERM, then SIGKILL after a grace period); whatever it leaves behind, in its
group or outside it (a ``setsid`` grandchild), is killed and listed
(:mod:`~orchestrator.executors.driver.contain`). A failed write of the log (a full disk,
an I/O error) fails the step at once and stops it. The group id is kept in the gate
folder so that the executor can reap it if the driver itself is killed outright.
"""

from __future__ import annotations

import contextlib
import errno
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

__all__ = ["Cancelled", "StepResult", "kill_group", "lease_folders", "prepare_run_as", "reap_active_step",
           "run_step", "seal_folders"]

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
    """Make a gate folder usable by the account its steps run as, and nothing more.

    The gate folder, ``runs/`` (logs, results: 0700) and everything the driver writes
    stay the service account's; only the output, home and compile-cache folders of the
    run that is running are handed to ``user`` (:func:`lease_folders`), and taken back
    when it ends (:func:`seal_folders`). A probe step checks that ``user`` can reach the
    gate folder.

    Args:
        user: Account name (``security.run_as_user``) or ``None`` (nothing to do).
        paths: The gate's :class:`~orchestrator.executors.plan.GatePaths`.

    Returns:
        ``USER`` and ``LOGNAME`` of the steps (empty without ``user``); each run's
        ``HOME`` comes with its lease.

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
    for folder in (paths.out_root, paths.compile_cache, paths.run_home):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o711)  # traversable to reach the run's own folder, not listable
    probe = subprocess.run(["test", "-x", str(paths.out_root)], user=entry.pw_uid, group=entry.pw_gid,
                           extra_groups=[], env={"PATH": os.defpath}, capture_output=True, timeout=60,
                           check=False)
    if probe.returncode != 0:
        raise RuntimeError(
            f"security.run_as_user={user} cannot reach {paths.out_root}: make the data directory and "
            "its parents traversable for that account (chmod o+x)")
    return {"USER": user, "LOGNAME": user}


def _chown_tree(folder: Path, uid: int, gid: int) -> None:
    """``lchown`` a folder and everything under it (links are never followed)."""
    os.lchown(folder, uid, gid)
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            try:
                os.lchown(os.path.join(root, name), uid, gid)
            except FileNotFoundError:
                pass


def lease_folders(user: str | None, folders: list[Path]) -> None:
    """Hand a run's own folders to the run account for the length of the run.

    Args:
        user: ``security.run_as_user`` or ``None`` (the folders are only created).
        folders: The run's output folder, home and compile cache.
    """
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        if user:
            entry = pwd.getpwnam(user)
            _chown_tree(folder, entry.pw_uid, entry.pw_gid)
            folder.chmod(0o700)


def seal_folders(user: str | None, folders: list[Path]) -> None:
    """Take a finished run's folders back (owned by the service account again), so that
    no later run, of this gate or another one under the same account, can change them.

    Args:
        user: ``security.run_as_user`` or ``None`` (nothing to do).
        folders: What :func:`lease_folders` handed out.
    """
    if not user:
        return
    for folder in folders:
        if folder.exists():
            _chown_tree(folder, os.geteuid(), os.getegid())


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
        self.write_failed = threading.Event()
        self.write_error: OSError | None = None
        self.consumer_error: BaseException | None = None
        self._skipping = False

    def _write(self, data: bytes) -> None:
        """Write to the log; the first failure (ENOSPC, EIO) is kept and every later chunk
        dropped, so that the step is stopped and never blocks on a full pipe."""
        if self.write_error is not None:
            return
        try:
            while data:  # an unbuffered write may be short when the disk is nearly full
                n = self.log.write(data)
                data = data[n:] if n else data
                if n == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            self.write_error = exc
            self.write_failed.set()

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
                    self._write(head)
                    self._write(b"\n# axbgate: output truncated at max_log_bytes\n")
                    self._lines(head, pending)
                    self.overflowed.set()
                continue  # keep draining so the step never blocks on a full pipe
            self._write(chunk)
            written += len(chunk)
            if self.write_error is None:  # a record the log does not hold is not evidence
                self._lines(chunk, pending)
        if pending and not self.overflowed.is_set() and self.consumer_error is None:
            self._deliver(bytes(pending))
        self.pipe.close()


class StepResult:
    """How one step ended: exit code (None if it never ran), error text, wall seconds."""

    __slots__ = ("exit_code", "error", "wall_s", "leftovers", "containment", "log_write_error")

    def __init__(self, exit_code: int | None, error: str | None, wall_s: float,
                 leftovers: list[dict] | None = None, containment: str | None = None,
                 log_write_error: bool = False) -> None:
        self.exit_code, self.error, self.wall_s = exit_code, error, wall_s
        self.leftovers = leftovers or []
        """Processes alive after the step's main process ended (killed): pid, command."""
        self.containment = containment
        """How the step was contained (``cgroup v2``, ``subreaper``, ...)."""
        self.log_write_error = log_write_error
        """The log could not be written (the disk is full or failing)."""


def _write_error_text(exc: OSError, log_name: str) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"disk full writing {log_name} ({exc.strerror}); the run was stopped"
    return f"I/O error writing {log_name} ({exc.strerror}); the run was stopped"


def _stop(child: subprocess.Popen, grace_s: float = _KILL_GRACE_S) -> None:
    """SIGTERM the child's group, SIGKILL it after ``grace_s`` seconds."""
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if child.poll() is None:
        kill_group(child.pid)


def run_step(argv: list[str], *, env: dict[str, str], cwd: Path, log_path: Path,
             deadline_s: float, max_log_bytes: int, pgid_file: Path,
             cancel_reason: Callable[[], str | None],
             on_line: Callable[[bytes], None] | None = None,
             spawn: Callable[[], Any] | None = None,
             run_as: str | None = None, log_name: str | None = None,
             spawn_pid: int | None = None, use_cgroup: bool = True) -> StepResult:
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
        log_name: The log as errors name it (``runs/NN-R.log``); default ``log_path``.
        spawn_pid: The process that forks the step when ``spawn`` is given (the fork
            server): it is in the step's cgroup while it forks.
        use_cgroup: Contain the step in a cgroup v2 where possible (False: subreaper).

    Returns:
        The :class:`StepResult`; ``error`` names a deadline, output overflow, a failed log
        write (``disk full writing runs/NN-R.log``), signal or non-zero exit (with
        ``(out of memory)`` when the log tail says so); ``leftovers`` lists what outlived
        the step's main process (killed).

    Raises:
        Cancelled: ``cancel_reason`` returned a reason before or while the step ran.
    """
    if cancel_reason():
        raise Cancelled(cancel_reason())
    from orchestrator.executors.driver.contain import StepContainer

    start = time.monotonic()
    log_name = log_name or str(log_path)
    overflow = f"wrote more than {max_log_bytes} bytes of output and was killed (max_log_bytes)"
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # the service's only
    with open(fd, "ab", buffering=0) as log:
        try:
            log.write(f"# axbgate step: {argv!r}\n".encode())
        except OSError as exc:
            return StepResult(None, _write_error_text(exc, log_name), time.monotonic() - start,
                              log_write_error=True)
        container = StepContainer(exclude=(spawn_pid,) if spawn_pid else (), use_cgroup=use_cgroup)
        if spawn is None:
            ids = {}
            if run_as:
                entry = pwd.getpwnam(run_as)
                ids = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            try:
                with container.spawning():
                    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True, **ids)
            except OSError as exc:  # missing program, no permission (run_as_user): the step fails
                container.reap()
                message = f"could not start {argv[0]}" + (f" as {run_as}" if run_as else "") + f": {exc}"
                with contextlib.suppress(OSError):
                    log.write(f"# axbgate: {message}\n".encode())
                return StepResult(None, message, time.monotonic() - start)
        else:
            with container.spawning(spawn_pid):
                child = spawn()
        pgid_file.write_text(f"{child.pid}\n")
        pump = _LogPump(child.stdout, log, max_log_bytes, on_line)
        pump.start()
        error = None
        while child.poll() is None:
            if pump.write_failed.is_set():
                error = _write_error_text(pump.write_error, log_name)  # type: ignore[arg-type]
            elif pump.overflowed.is_set():
                error = overflow
            elif time.monotonic() - start > deadline_s:
                error = f"exceeded its deadline of {deadline_s:g} s and was killed"
            if error or cancel_reason():
                _stop(child, grace_s=0.0 if pump.write_failed.is_set() else _KILL_GRACE_S)
                break
            time.sleep(_POLL_S)
        code = child.wait()
        # Whatever the step left behind, in its process group or outside it (setsid),
        # dies with it, so nothing outlives the run it belongs to; it is listed.
        kill_group(child.pid)
        leftovers = container.reap()
        pump.join(timeout=30)
        if error is None and pump.write_failed.is_set():
            error = _write_error_text(pump.write_error, log_name)  # type: ignore[arg-type]
        if error is None and pump.overflowed.is_set():
            error = overflow
        pgid_file.unlink(missing_ok=True)
        if leftovers and not pump.write_failed.is_set():
            from orchestrator.executors.driver.contain import leftover_note

            with contextlib.suppress(OSError):
                log.write(f"# axbgate: {leftover_note(leftovers)}\n".encode())
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
    return StepResult(code, error, wall, leftovers=leftovers, containment=container.kind,
                      log_write_error=pump.write_failed.is_set())
