"""The driver's side of the trainer's fork server (``trainer/forkserver.py``).

The server is started once per local allocation, imports torch while the health gate runs,
and forks each run's processes; this module starts it, asks it for a run and presents the
run as a child the step runner can poll, wait for and stop (its leader heads its own
process group, like a ``Popen(..., start_new_session=True)`` child).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

__all__ = ["ForkServer", "ForkedRun", "fork_server_usable"]

_REFUSE_PREFIXES = ("PYTHON", "LD_")
_MAX_SOCKET_PATH = 100
"""Longest socket path used as is, bytes (sun_path holds 108 with its NUL)."""


def fork_server_usable(side_env: dict[str, str], source_dir: Path | None) -> str | None:
    """Why a run must NOT use the fork server, or ``None`` when it may.

    A run whose environment changes what ``import torch`` or the interpreter reads, or
    whose trainer source is another revision than the installed one, needs a fresh
    interpreter.
    """
    if source_dir is not None:
        return "the run's source is a git revision, not the installed trainer"
    bad = sorted(k for k in side_env if k.startswith(_REFUSE_PREFIXES))
    if bad:
        return f"the run's environment sets {', '.join(bad)}, read when the interpreter starts"
    return None


class ForkedRun:
    """One run forked by the server: ``pid`` heads its process group."""

    def __init__(self, conn: socket.socket, pid: int, stdout: BinaryIO) -> None:
        self._conn, self.pid, self.stdout = conn, pid, stdout
        self._buffer = b""
        self.returncode: int | None = None

    def _read(self, block: bool) -> None:
        self._conn.setblocking(block)
        try:
            chunk = self._conn.recv(4096)
        except BlockingIOError:
            return
        if not chunk:  # the server went away without an answer
            self.returncode = self.returncode if self.returncode is not None else -9
            return
        self._buffer += chunk
        if b"\n" in self._buffer:
            self.returncode = int(json.loads(self._buffer.split(b"\n", 1)[0])["exit_code"])
            self._conn.close()

    def poll(self) -> int | None:
        """The exit code once the run's leader has exited, else ``None``."""
        if self.returncode is None:
            self._read(block=False)
        return self.returncode

    def wait(self) -> int:
        """Block until the run's leader has exited; return its exit code."""
        while self.returncode is None:
            self._read(block=True)
        return self.returncode


class ForkServer:
    """A running ``python -m trainer.forkserver`` of this allocation."""

    def __init__(self, python: str, socket_path: Path, log_path: Path, env: dict[str, str]) -> None:
        if len(str(socket_path).encode()) > _MAX_SOCKET_PATH:
            # A UNIX socket path holds at most 107 bytes; deep gate folders get a short
            # stand-in in the temporary directory, named after the gate folder.
            digest = hashlib.sha256(str(socket_path).encode()).hexdigest()[:16]
            socket_path = Path(tempfile.gettempdir()) / f"axbgate-fs-{digest}.sock"
        self.socket_path = socket_path
        socket_path.unlink(missing_ok=True)
        with open(log_path, "ab") as log:
            self._proc = subprocess.Popen([python, "-m", "trainer.forkserver", str(socket_path)],
                                          env=env, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)

    def ready(self, timeout_s: float) -> bool:
        """Wait (with a deadline) until the server listens; False if it died or timed out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            if self.socket_path.exists():
                return True
            time.sleep(0.05)
        return False

    @property
    def pid(self) -> int:
        """The server's process id (it forks every run; containment moves it around a spawn)."""
        return self._proc.pid

    def spawn(self, args: list[str], *, env: dict[str, str], cwd: Path, nproc: int) -> ForkedRun:
        """Ask for one run: ``python -m trainer train ARGS`` on ``nproc`` forked ranks.

        Raises:
            OSError: The server cannot be reached or refused the request.
        """
        read_fd, write_fd = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.socket_path))
            request = {"args": args, "env": env, "cwd": str(cwd), "nproc": nproc}
            socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [write_fd])
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    raise OSError("the fork server closed the connection")
                line += chunk
            answer = json.loads(line)
            if "pid" not in answer:
                raise OSError(f"the fork server refused the run: {answer}")
        except BaseException:
            conn.close()
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        return ForkedRun(conn, int(answer["pid"]), open(read_fd, "rb"))  # noqa: SIM115

    def stop(self) -> None:
        """Stop the server and anything it still runs."""
        try:
            os.killpg(self._proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self._proc.wait(timeout=30)
        self.socket_path.unlink(missing_ok=True)
