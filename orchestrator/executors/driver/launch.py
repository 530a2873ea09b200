"""How the driver launches a step across the allocation: user-command launch modes, the
rendezvous port of each step, and recognising a port collision in a failed step's log.

Launch modes of a ``workload.command`` (``WorkloadSpec.launch``; docs/multi-node.md):

- ``per_node`` (default): once per node, e.g. a ``torchrun`` that starts the node's ranks
  itself. Under Slurm: ``srun --ntasks=<nodes> --ntasks-per-node=1``; locally: once.
- ``per_rank``: once per rank (``SLURM_PROCID`` / ``RANK`` tell each copy which it is).
  Under Slurm: ``srun --ntasks=<nodes x ranks_per_node>``; locally: ``torch.distributed.run
  --no-python`` starts ``ranks_per_node`` copies with ``RANK``/``WORLD_SIZE`` set.
- ``batch``: once, in the allocation's batch step on node 0 (the command does its own
  ``srun``).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

__all__ = ["LAUNCH_MODES", "PortChoice", "choose_port", "command_argv", "port_collision", "reaper_prefix",
           "reaper_leftovers"]

LAUNCH_MODES = ("per_node", "per_rank", "batch")

_COLLISION_RE = re.compile(r"EADDRINUSE|Address already in use|address already in use")
_TAIL_BYTES = 20000


def srun_prefix(ntasks: int, per_node: int) -> list[str]:
    """``srun`` of one job step across the allocation; one failed task ends the step."""
    return ["srun", f"--ntasks={ntasks}", f"--ntasks-per-node={per_node}", "--kill-on-bad-exit=1",
            "--export=ALL"]


def reaper_prefix(python: str) -> list[str]:
    """What every task of a run's ``srun`` step starts with: the per-task reaper
    (``driver/reaper.py``), which kills what the task leaves behind."""
    return [python, str(Path(__file__).with_name("reaper.py")), "--"]


def command_argv(mode: str, argv: list[str], *, under_slurm: bool, nodes: int,
                 ranks_per_node: int, python: str, master: tuple[str, str],
                 wrap: list[str] | None = None) -> list[str]:
    """The argv that starts a user command in launch mode ``mode``.

    Args:
        mode: One of :data:`LAUNCH_MODES`.
        argv: The command with its placeholders already substituted.
        under_slurm: The driver runs in a Slurm allocation.
        nodes: Nodes of the allocation.
        ranks_per_node: Ranks per node.
        python: Interpreter for the local ``per_rank`` launcher.
        master: (MASTER_ADDR, MASTER_PORT) of the step.
        wrap: Put before ``argv`` in every ``srun`` task (:func:`reaper_prefix`).

    Raises:
        ValueError: Unknown mode.
    """
    if mode not in LAUNCH_MODES:
        raise ValueError(f"workload.launch must be one of {', '.join(LAUNCH_MODES)}, got {mode!r}")
    if mode == "batch":
        return list(argv)
    if under_slurm:
        if mode == "per_node":
            return [*srun_prefix(nodes, 1), *(wrap or []), *argv]
        return [*srun_prefix(nodes * ranks_per_node, ranks_per_node), *(wrap or []), *argv]
    if mode == "per_node":
        return list(argv)
    return [python, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={ranks_per_node}",
            "--master_addr", master[0], "--master_port", master[1], "--no-python", *argv]


def port_in_use(addr: str, port: int) -> bool:
    """True when a listener holds ``port`` on ``addr`` or on the wildcard address (a
    rendezvous store binds the wildcard, so a listener on any local address collides)."""
    for host in ("0.0.0.0", addr):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


class PortChoice:
    """The port of one step: its index in the derivation and the ports found busy."""

    __slots__ = ("index", "port", "busy")

    def __init__(self, index: int, port: int, busy: list[int]) -> None:
        self.index, self.port, self.busy = index, port, busy


def choose_port(job_id: str, index: int, addr: str, *, derive: Callable[[str, int], int],
                in_use: Callable[[str, int], bool] = port_in_use, tries: int = 16) -> PortChoice:
    """The first free port of ``derive(job_id, index)``, ``derive(job_id, index + 1)``, ...

    Args:
        job_id: Allocation id (every node derives the same ports from it).
        index: First derivation index to try.
        addr: MASTER_ADDR (the port is checked on it and on the wildcard address).
        derive: ``health.preamble.derive_master_port``.
        in_use: Port check (tests pass a fake).
        tries: Indices tried before giving up on checking.

    Returns:
        The choice; after ``tries`` busy ports, the last derived one (the step then
        fails with EADDRINUSE and is retried once).
    """
    busy: list[int] = []
    for i in range(index, index + tries):
        port = derive(job_id, i)
        if not in_use(addr, port):
            return PortChoice(i, port, busy)
        busy.append(port)
    return PortChoice(index + tries - 1, busy[-1], busy)


def port_collision(log_path: Path) -> bool:
    """True when the tail of a failed step's log says a port was already in use."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - _TAIL_BYTES))
            return bool(_COLLISION_RE.search(fh.read().decode("utf-8", "replace")))
    except OSError:
        return False


def reaper_leftovers(log_path: Path) -> list[dict]:
    """The processes the per-task reapers of a step killed, from their lines in the log's
    tail (``# axbgate-reaper {json}``); each as ``{"pid", "command", "host"?}``."""
    import json

    from orchestrator.executors.driver.reaper import MARKER

    found: list[dict] = []
    try:
        with open(log_path, "rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - 4 * _TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return found
    for line in tail.splitlines():
        if line.startswith(MARKER):
            try:
                found += [p for p in json.loads(line[len(MARKER):])["leftovers"] if isinstance(p, dict)]
            except (ValueError, KeyError, TypeError):
                continue
    return found


def job_hostnames(under_slurm: bool) -> list[str]:
    """The allocation's nodes, node 0 first: ``scontrol show hostnames`` of
    ``SLURM_JOB_NODELIST`` inside a Slurm job, else this host."""
    import os
    import subprocess

    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if under_slurm and nodelist:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist],
                             capture_output=True, text=True, timeout=30, check=False)
        if names := out.stdout.split():
            return names
    return [socket.gethostname()]


def launch_preamble(use_preamble: bool, job_id: str, hostnames: list[str],
                    port_index: int) -> tuple[dict[str, str], dict]:
    """Launch environment of the next step: the two-tray preamble (or, when it is off, a
    bare MASTER_ADDR) with a fresh MASTER_PORT, checked free on node 0.

    Args:
        use_preamble: The plan's ``preamble`` switch (False only to diagnose without it).
        job_id: The allocation's job id (the port derivation's seed).
        hostnames: The allocation's nodes, node 0 first.
        port_index: The index of the last port used (the next call takes a later one).

    Returns:
        ``(env, record)``: the variables to set, and what was chosen (``index``,
        interface, master address and port, busy ports skipped, reason).
    """
    import os

    from health.network import gather_address_facts
    from health.preamble import build_preamble, derive_master_port

    pre = None
    if use_preamble:
        pre = build_preamble(gather_address_facts(hostnames, node_rank=0), master_port=1,
                             base_env=os.environ)
    choice = choose_port(job_id, port_index + 1, pre.master_addr if pre else "0.0.0.0",
                         derive=derive_master_port)
    if pre is None:  # diagnosing only: what a launch without the preamble does
        env = {"MASTER_ADDR": hostnames[0], "MASTER_PORT": str(choice.port)}
        record = {"interface": None, "master_addr": hostnames[0],
                  "reason": "preamble disabled (topology.preamble=false)"}
    else:
        env = {**pre.env, "MASTER_PORT": str(choice.port)}
        record = {"interface": pre.interface, "master_addr": pre.master_addr, "reason": pre.reason}
    return env, {"index": choice.index, **record, "master_port": choice.port, "busy_ports": choice.busy}
