"""A fork server for the bundled trainer: pay ``import torch`` once per allocation.

Started by the allocation driver at the beginning of a local gate (while the health gate
runs), it imports torch and the trainer WITHOUT touching CUDA, then serves one request
per run on a UNIX socket. For each run it forks a run leader (a new session, so the driver
can stop the whole run with ``killpg``) whose stdout/stderr are the file descriptor the
driver sent (SCM_RIGHTS); the leader sets the run's environment and working directory and
forks one process per rank, each calling the trainer's ``main`` with ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` set, as torchrun would. Every run
is therefore still a fresh set of processes (process isolation between runs, DESIGN.md
section 2); only the already-imported modules are shared.

Caveat (why the driver falls back to torchrun): variables read while torch is IMPORTED
take the server's values, so a side whose environment sets ``PYTHON*`` or ``LD_*``
variables, or whose source differs from the installed trainer, is launched with torchrun.

Protocol, one connection per run: the client sends one JSON line ``{"args": [...],
"env": {...}, "cwd": "...", "nproc": N}`` with the output descriptor attached; the server
answers ``{"pid": leader_pid}`` and, when the leader has exited, ``{"exit_code": code}``
(negative: killed by that signal).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import sys
import time

_GRACE_S = 10.0


def _die_with_parent() -> None:
    """SIGKILL this process when the driver that started it dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _rank(args: list[str], rank: int, nproc: int) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                      LOCAL_WORLD_SIZE=str(nproc), GROUP_RANK="0")
    from trainer.__main__ import main

    code = 1
    try:
        code = main(["train", *args])
    except BaseException:  # noqa: BLE001 - e.g. process-group init: say why before exiting
        import traceback

        traceback.print_exc()
    finally:  # main() normally ends the process itself (os._exit after flushing)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _leader(request: dict, out_fd: int) -> None:
    """Body of the forked run leader: never returns."""
    code = 1
    try:
        os.setsid()
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        nproc = int(request["nproc"])
        children = {}
        for rank in range(nproc):
            pid = os.fork()
            if pid == 0:
                _rank(request["args"], rank, nproc)
            children[pid] = rank
        code = _wait_ranks(children)
    except BaseException as exc:  # noqa: BLE001 - report, never fall back into the server loop
        print(f"axbgate fork server: run leader failed: {exc!r}", file=sys.stderr, flush=True)
    os._exit(code)


def _wait_ranks(children: dict[int, int]) -> int:
    """Wait for every rank; the first failure stops the others (torchrun's behaviour)."""
    code = 0
    deadline = None
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG) if deadline else os.waitpid(-1, 0)
        if pid == 0:
            if time.monotonic() > deadline:
                for other in children:
                    os.kill(other, signal.SIGKILL)
            time.sleep(0.05)
            continue
        children.pop(pid, None)
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0 and code == 0:
            code = rc if rc > 0 else 128 - rc
            for other in children:
                os.kill(other, signal.SIGTERM)
            deadline = time.monotonic() + _GRACE_S
    return code


def _serve_one(server: socket.socket, conn: socket.socket) -> None:
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 1)
    if not fds:
        conn.sendall(b'{"error": "no output descriptor"}\n')
        return
    request = json.loads(msg.decode())
    pid = os.fork()
    if pid == 0:
        conn.close()
        server.close()
        _leader(request, fds[0])
    os.close(fds[0])
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    conn.sendall(json.dumps({"exit_code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


_PREIMPORTS = (
    "torch.distributed.fsdp",  # fully_shard: ~1 s of every run's model build
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper",
    "torch._dynamo",  # torch.compile(block): ~1.5 s of the model build
    "torch._inductor.compile_fx",  # the first compiled step: ~2 s, even with a warm cache
)
"""Modules every run of the bundled trainer imports lazily; imported once here instead of
once per run (none of them starts a thread or touches CUDA: checked below)."""


def _preimport() -> None:
    """Import :data:`_PREIMPORTS`; a module that fails to import is left to the run (which
    then pays for it, or reports the error itself).

    While importing, ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` makes ``torch.cuda.is_available()``
    ask NVML instead of the CUDA runtime: a runtime device count (which some of these
    modules take at import) marks every later fork "bad", and the ranks then fail with
    "Cannot re-initialize CUDA in forked subprocess" (seen on an H200, 2026-12-01).
    """
    import importlib

    import torch

    t0 = time.monotonic()
    saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        for name in _PREIMPORTS:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - the run imports it again and reports
                print(f"axbgate fork server: pre-import of {name} failed: {exc}", file=sys.stderr)
    finally:
        if saved is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved
    if torch.cuda.is_initialized():  # a fork would give every run a broken CUDA context
        raise RuntimeError("CUDA was initialised while pre-importing; the fork server cannot serve")
    print(f"axbgate fork server: pre-imported {len(_PREIMPORTS)} modules in "
          f"{time.monotonic() - t0:.2f} s; OS threads: {_thread_names()}", file=sys.stderr)


def _thread_names() -> str:
    """This process's OS threads as ``name x count`` (Linux ``/proc``), for the log."""
    names: dict[str, int] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            names[name] = names.get(name, 0) + 1
    except OSError:
        return "unknown"
    return ", ".join(f"{n} x{c}" for n, c in sorted(names.items()))


def fork_is_poisoned() -> bool:
    """True when a child forked now could not use CUDA.

    Forks one short-lived child that reports through its exit status: torch's "bad fork"
    mark (the CUDA runtime was touched in this process), or, where a GPU is present, a
    failing first CUDA operation. The second check is there because importing Inductor
    starts the CUDA driver's own thread in this process (seen on an H200, 2026-12-01)
    without touching the runtime; forked runs then worked, and this verifies it on every
    machine instead of assuming it.
    """
    import torch

    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if torch.cuda._is_in_bad_fork():
                code = 3
            elif torch.cuda.device_count() > 0:  # NVML count first: no runtime touched here
                torch.ones(1, device="cuda").add_(1).cpu()
        except Exception:  # noqa: BLE001 - any CUDA failure in the child is the answer
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 3


def serve(path: str) -> None:
    """Import the trainer, then serve run requests on the UNIX socket ``path`` forever."""
    _die_with_parent()
    import torch  # noqa: F401 - the point: imported once, before any fork
    import torch.distributed  # noqa: F401

    import trainer.train  # noqa: F401
    from trainer.__main__ import main  # noqa: F401

    preimport = os.environ.get("AXBGATE_FORKSERVER_PREIMPORT", "1") == "1"
    if preimport:
        _preimport()
    if fork_is_poisoned():
        if preimport:  # start again without the pre-imports: slower, but it serves
            print("axbgate fork server: a pre-import touched CUDA; restarting without "
                  "pre-imports", file=sys.stderr, flush=True)
            os.environ["AXBGATE_FORKSERVER_PREIMPORT"] = "0"
            os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
        raise RuntimeError("importing torch and the trainer touched CUDA; the fork server "
                           "cannot serve (the driver falls back to torchrun)")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    server.bind(tmp)
    server.listen(1)
    os.rename(tmp, path)  # the socket appears only once the imports are done
    while True:
        conn, _ = server.accept()
        with conn:
            _serve_one(server, conn)


if __name__ == "__main__":
    serve(sys.argv[1])
