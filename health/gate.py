"""``run_health_gate``: run every check on this machine or allocation.

Two launch modes:

- **launcher** (default): this process reads the node's GPUs, computes the preamble,
  spawns one rank process per GPU (NCCL) or ``criteria.default_nproc`` CPU ranks
  (gloo), supervises them under the overall deadline and judges. Several nodes
  without Slurm: run it once per node with the same ``hostnames`` and ``job_id``
  and each node's ``node_rank`` (node 0 prints the complete report).
- **slurm**: inside an ``srun`` step with one task per GPU, every task is one rank;
  local rank 0 of each node reads the GPUs, rank 0 judges. Launch with
  ``srun --kill-on-bad-exit=1`` so a rank that exits on a hang ends the others.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from health.clocks import GpuProbe, read_gpus
from health.criteria import Criteria, load_criteria, select_criteria
from health.inventory import NodeFacts, summarize_inventory
from health.judge import FAILED, allocation_verdict, clock_bin_summary, judge
from health.network import NetworkResult, gather_address_facts, port_is_free, resolve
from health.preamble import Preamble, build_preamble, derive_master_port
from health.rank import RankPlan, parse_fault, run_rank
from health.report import HealthReport
from health.results import GateResults, collect_results
from health.timeouts import HangRecord, supervise

logger = logging.getLogger(__name__)

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_RANK_ENTRY = "import sys; from health.rank import main; sys.exit(main(sys.argv[1:]))"


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm hostlist expression (``gpu[01-03,07],login1``).

    Args:
        nodelist: the compressed list (``SLURM_JOB_NODELIST``).

    Returns:
        Hostnames in order, zero padding kept.

    Raises:
        ValueError: on an unbalanced bracket.
    """
    hosts: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", nodelist):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if m is None:
            if "[" in part or "]" in part:
                raise ValueError(f"bad hostlist {nodelist!r}")
            hosts.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for rng in ranges.split(","):
            lo, _, hi = rng.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                hosts.append(f"{prefix}{str(i).zfill(len(lo))}{suffix}")
    return hosts


def infer_node_rank(hostnames: Sequence[str], env: Mapping[str, str]) -> int:
    """This node's index in ``hostnames`` when the caller did not say.

    Args:
        hostnames: every node, node 0 first.
        env: the environment (``SLURM_NODEID`` is used when set).

    Returns:
        ``SLURM_NODEID``; else the position of this host's name (full or short) in
        ``hostnames``; else 0 for a single node.

    Raises:
        ValueError: with several nodes when neither source identifies this node.
    """
    if "SLURM_NODEID" in env:
        return int(env["SLURM_NODEID"])
    if len(hostnames) == 1:
        return 0
    me = socket.gethostname()
    for name in (me, me.split(".")[0]):
        for i, host in enumerate(hostnames):
            if host in (name, name.split(".")[0]) or host.split(".")[0] == name:
                return i
    raise ValueError(f"cannot tell which of {list(hostnames)} this host ({me}) is: "
                     "pass node_rank / --node-rank")


def _topology(criteria: Criteria, num_nodes: int, per_node: int, model: str | None) -> str:
    """``<nodes>x<per node> <model> <interconnect>`` from what the probes found.

    The interconnect comes from the hardware, not from whichever criteria file judged it:
    CPU ranks always talk over ``TCP`` (gloo), and a GPU allocation takes the criteria's
    interconnect only when the criteria are for that GPU model; otherwise none is named.
    So the same machine gets the same label under any criteria.
    """
    if not model:
        return f"{num_nodes}x{per_node} CPU TCP"
    short = model.replace("NVIDIA ", "")
    matches = criteria.gpu_model is not None and criteria.gpu_model.lower() in model.lower()
    inter = criteria.interconnect.split(",")[0].split("(")[0].strip() if matches else ""
    return f"{num_nodes}x{per_node} {short} {inter}".strip()


def _build_report(
    results: GateResults,
    criteria: Criteria,
    t0: float,
    job_id: str | None,
    cluster: str | None,
    node_rank: int = 0,
) -> HealthReport:
    checks = judge(results, criteria)
    inv = (
        summarize_inventory(
            results.nodes,
            num_ranks=results.world_size,
            scheduler_job_id=job_id,
            cluster=cluster,
        )
        if results.nodes
        else None
    )
    bin_, low = clock_bin_summary(results, criteria)
    limits = [
        g.power_limit_w
        for n in results.nodes
        for g in n.gpus.readings
        if g.power_limit_w is not None
    ]
    per_node = results.world_size // max(1, results.num_nodes)
    if inv is not None and inv.num_gpus:
        per_node = inv.gpus_per_node[0]
    return HealthReport(
        checks=checks,
        verdict=allocation_verdict(checks),
        inventory=inv,
        criteria_name=criteria.name,
        criteria_source=criteria.source,
        topology=_topology(
            criteria, results.num_nodes, per_node, None if inv is None else inv.gpu_model
        ),
        clock_bin=bin_,
        max_sm_clock_mhz=low,
        power_limit_w=min(limits) if limits else None,
        duration_s=time.monotonic() - t0,
        results=results,
        node_rank=node_rank,
    )


def _resolve_criteria(
    criteria: Criteria | str | Path | None, probe: GpuProbe, num_nodes: int
) -> Criteria:
    if isinstance(criteria, Criteria):
        return criteria
    if criteria is not None:
        return load_criteria(criteria)
    model = probe.readings[0].name if probe.readings else None
    count = len(probe.readings) * num_nodes if probe.readings else 0
    return select_criteria(model, count, num_nodes)


def _network(
    hostnames: Sequence[str],
    node_rank: int,
    job_id: str,
    run_index: int,
    interface: str | None,
    env: Mapping[str, str],
) -> tuple[NetworkResult, Preamble | None]:
    host = hostnames[node_rank]
    addrs = resolve(host)
    try:
        facts = gather_address_facts(hostnames, node_rank)
        port = derive_master_port(job_id, run_index)
        pre = build_preamble(
            facts, master_port=port, base_env=env, preferred_interface=interface
        )
        if len(hostnames) == 1:
            # One node: nobody else derives the port, so step past a busy one.
            for extra in range(1, 20):
                if port_is_free(pre.master_addr, pre.master_port):
                    break
                port = derive_master_port(job_id, run_index + 1000 * extra)
                pre = build_preamble(
                    facts, master_port=port, base_env=env, preferred_interface=interface
                )
    except ValueError as exc:
        logger.error("host=%s preamble failed: %s", host, exc)
        return NetworkResult(host, node_rank, len(hostnames), addrs, error=str(exc)), None
    return (
        NetworkResult(
            host, node_rank, len(hostnames), addrs, pre.interface, pre.master_addr,
            pre.master_port, pre.reason,
        ),
        pre,
    )


def run_health_gate(
    criteria: Criteria | str | Path | None = None,
    *,
    nproc: int | None = None,
    hostnames: Sequence[str] | None = None,
    node_rank: int | None = None,
    job_id: str | None = None,
    run_index: int = 0,
    interface: str | None = None,
    inject_fault: str | None = None,
    env: Mapping[str, str] | None = None,
) -> HealthReport:
    """Run the whole health gate and judge it.

    Args:
        criteria: a ``Criteria``, a criteria file path or shipped name; None selects
            the shipped criteria matching the GPUs found (``select_criteria``).
        nproc: ranks on this node; default one per GPU with NCCL, else the criteria's
            ``default_nproc`` (2 for ``cpu-gloo``). Ignored under Slurm.
        hostnames: every node in node-rank order (launcher mode across nodes without
            Slurm); default this host alone.
        node_rank: this node's index in ``hostnames``; None infers it from
            ``SLURM_NODEID`` (one launcher per node under ``srun``), else from this
            host's name in ``hostnames``.
        job_id: allocation id from which every node derives the same fresh
            MASTER_PORT; required with several nodes (default: Slurm's, else random).
        run_index: which run of the allocation this is (0 = the gate).
        interface: socket interface to use instead of auto-detection (also
            ``AXBGATE_HEALTH_IFNAME``).
        inject_fault: fault injection for proving the gate, e.g. ``never_join:1``.
        env: launching environment (default ``os.environ``).

    Returns:
        The judged report.

    Raises:
        ValueError: on bad arguments or when no shipped criteria matches.
    """
    env = dict(os.environ if env is None else env)
    parse_fault(inject_fault)
    interface = interface or env.get("AXBGATE_HEALTH_IFNAME") or None
    if hostnames is None and nproc is None and "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        return _run_slurm(criteria, env, run_index, interface, inject_fault)
    hosts = list(hostnames or [socket.gethostname()])
    if node_rank is None:
        node_rank = infer_node_rank(hosts, env)
    return _run_launcher(
        criteria, nproc, hosts, node_rank,
        job_id or env.get("SLURM_JOB_ID"), run_index, interface, inject_fault, env,
    )


def _run_launcher(
    criteria: Criteria | str | Path | None,
    nproc: int | None,
    hostnames: list[str],
    node_rank: int,
    job_id: str | None,
    run_index: int,
    interface: str | None,
    fault: str | None,
    env: dict[str, str],
) -> HealthReport:
    t0 = time.monotonic()
    num_nodes = len(hostnames)
    if not 0 <= node_rank < num_nodes:
        raise ValueError(f"node_rank {node_rank} outside 0..{num_nodes - 1}")
    if num_nodes > 1 and not job_id:
        raise ValueError("several nodes need a shared job_id to agree on MASTER_PORT")
    host = hostnames[node_rank]
    probe = read_gpus(host, visible=env.get("CUDA_VISIBLE_DEVICES"))
    crit = _resolve_criteria(criteria, probe, num_nodes)
    backend = crit.collectives.backend
    if backend == "auto":
        backend = "nccl" if probe.readings else "gloo"
    if nproc is None:
        nproc = len(probe.readings) if backend == "nccl" else crit.default_nproc
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    world = nproc * num_nodes
    net, pre = _network(hostnames, node_rank, job_id or uuid.uuid4().hex, run_index,
                        interface, env)
    logger.info("host=%s backend=%s nproc=%d preamble=%s", host, backend, nproc, net.reason)
    if pre is None:
        node = NodeFacts(host, node_rank, nproc, probe, _software_stub())
        results = GateResults(world, num_nodes, backend, nodes=(node,), network=(net,))
        return _build_report(results, crit, t0, job_id, env.get("SLURM_CLUSTER_NAME"), node_rank)
    d = crit.deadlines
    deadline = (d.probe_s + d.rendezvous_s + d.correctness_s + 2 * d.gather_s
                + 2 * d.bandwidth_s + d.load_s + 30.0)
    with tempfile.TemporaryDirectory(prefix="axbgate-health-") as tmp:
        procs, plans = [], []
        rank_env = {**env, **pre.env}
        rank_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        for local in range(nproc):
            rank = node_rank * nproc + local
            plan = RankPlan(
                rank=rank, world_size=world, local_rank=local, local_world_size=nproc,
                node_rank=node_rank, num_nodes=num_nodes, host=host, backend=backend,
                criteria=crit.to_dict(), result_path=str(Path(tmp, f"rank{rank}.json")),
                fault=fault, node_probe=probe.to_dict() if local == 0 else None,
            )
            path = Path(tmp, f"rank{rank}.plan.json")
            path.write_text(json.dumps(dataclasses.asdict(plan)))
            plans.append(plan)
            extra = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(local),
                     "LOCAL_WORLD_SIZE": str(nproc)}
            procs.append(subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-c", _RANK_ENTRY, str(path)], env={**rank_env, **extra}))
        exits, timed_out = supervise(
            procs, deadline_s=deadline,
            dump_paths=[Path(tmp, f"rank{p.rank}.plan.stack") for p in plans],
        )
        states = []
        for p in plans:
            rp = Path(p.result_path or "")
            states.append(json.loads(rp.read_text()) if rp.exists() else None)
    results = collect_results(
        states, world_size=world, num_nodes=num_nodes, backend=backend, network=[net],
        rank_exits=exits, timed_out=timed_out, deadline_s=deadline,
    )
    if not results.nodes:
        node = NodeFacts(host, node_rank, nproc, probe, _software_stub())
        results = dataclasses.replace(results, nodes=(node,))
    return _build_report(results, crit, t0, job_id, env.get("SLURM_CLUSTER_NAME"), node_rank)


def _software_stub() -> Any:
    import platform  # noqa: PLC0415

    from health.inventory import SoftwareVersions  # noqa: PLC0415

    return SoftwareVersions(python=platform.python_version())


def _slurm_hostnames(env: Mapping[str, str]) -> list[str]:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        out = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
            timeout=30, check=True,
        ).stdout.split()
        if out:
            return out
    except (OSError, subprocess.SubprocessError) as exc:
        logger.info("scontrol show hostnames failed (%s); parsing %s", exc, nodelist)
    return expand_nodelist(nodelist)


def _run_slurm(
    criteria: Criteria | str | Path | None,
    env: dict[str, str],
    run_index: int,
    interface: str | None,
    fault: str | None,
) -> HealthReport:
    t0 = time.monotonic()
    rank, world = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])
    local, node_rank = int(env.get("SLURM_LOCALID", "0")), int(env.get("SLURM_NODEID", "0"))
    hostnames = _slurm_hostnames(env)
    num_nodes = len(hostnames)
    local_world = world // max(1, num_nodes)
    job_id = env.get("SLURM_JOB_ID", "slurm")
    host = hostnames[node_rank]
    visible = env.get("CUDA_VISIBLE_DEVICES")
    probe = read_gpus(host, visible=visible) if local == 0 else GpuProbe(host, None)
    crit = _resolve_criteria(criteria, probe, num_nodes) if local == 0 or criteria else None
    if crit is None:
        # Other local ranks learn the model from NVML too; reading is cheap.
        crit = _resolve_criteria(None, read_gpus(host, visible=visible), num_nodes)
    backend = crit.collectives.backend
    if backend == "auto":
        backend = "nccl" if env.get("CUDA_VISIBLE_DEVICES", "x") != "" and (
            probe.readings or local != 0) else "gloo"
    net, pre = _network(hostnames, node_rank, job_id, run_index, interface, env)
    if pre is None:
        results = GateResults(world, num_nodes, backend, network=(net,),
                              nodes=(NodeFacts(host, node_rank, local_world, probe,
                                               _software_stub()),))
        return _build_report(results, crit, t0, job_id, env.get("SLURM_CLUSTER_NAME"))
    os.environ.update(pre.env)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local))
    plan = RankPlan(rank=rank, world_size=world, local_rank=local, local_world_size=local_world,
                    node_rank=node_rank, num_nodes=num_nodes, host=host, backend=backend,
                    criteria=crit.to_dict(), fault=fault,
                    node_probe=probe.to_dict() if local == 0 else None)

    def on_hang(record: HangRecord) -> None:
        results = GateResults(world, num_nodes, backend, network=(net,), hangs=(record,))
        report = _build_report(results, crit, t0, job_id, env.get("SLURM_CLUSTER_NAME"))
        sys.stdout.write("\n".join(report.to_records()) + "\n")
        sys.stdout.flush()

    state = run_rank(plan, on_hang=on_hang)
    results = collect_results([state], world_size=world, num_nodes=num_nodes, backend=backend,
                              network=[net])
    report = _build_report(results, crit, t0, job_id, env.get("SLURM_CLUSTER_NAME"))
    if rank != 0 and report.verdict != FAILED:
        logger.debug("rank=%d local report %s (rank 0 reports the allocation)", rank,
                     report.verdict)
    return report
