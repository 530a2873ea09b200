"""One rank of the health gate: rendezvous, correctness, gather, bandwidth, load.

Started by the local launcher (``python -m health.rank PLAN.json``, one process per
GPU or CPU rank) or called in-process under Slurm (one task per GPU). Every stage
runs under ``timeouts.StageWatchdog``; the state is written to ``result_path`` after
every stage (temp file + rename) so a hang or crash keeps what was measured.

Ordering that the idle check relies on: local rank 0 reads the GPUs *before* the
rendezvous, and no rank touches CUDA until the rendezvous completes, so the read
sees no compute process of this gate.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from health.criteria import Criteria, criteria_from_mapping
from health.timeouts import EXIT_FAILED, EXIT_OK, HangRecord, StageWatchdog

logger = logging.getLogger(__name__)

FAULTS = ("never_join",)
"""Fault injection for proving the gate: ``never_join:<rank>`` makes that rank
complete the rendezvous and then never enter the first collective."""


@dataclasses.dataclass(frozen=True)
class RankPlan:
    """What one rank needs to know."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    host: str
    backend: str
    """``gloo`` or ``nccl``."""
    criteria: dict[str, Any]
    """``Criteria.to_dict()``."""
    result_path: str | None = None
    fault: str | None = None
    """``never_join:<rank>`` or None."""
    node_probe: dict[str, Any] | None = None
    """``GpuProbe.to_dict()`` the launcher read before starting ranks (local rank 0);
    None makes local rank 0 read the GPUs itself."""


def parse_fault(fault: str | None) -> tuple[str, int] | None:
    """Parse a fault-injection spec.

    Args:
        fault: ``"<kind>:<rank>"`` or None.

    Returns:
        (kind, rank) or None.

    Raises:
        ValueError: on an unknown kind or a malformed spec.
    """
    if not fault:
        return None
    kind, _, rank = fault.partition(":")
    if kind not in FAULTS or not rank.isdigit():
        raise ValueError(f"fault must be one of {FAULTS} as '<kind>:<rank>', got {fault!r}")
    return kind, int(rank)


class _State:
    def __init__(self, plan: RankPlan) -> None:
        self.plan = plan
        self.data: dict[str, Any] = {
            "rank": plan.rank,
            "host": plan.host,
            "pid": os.getpid(),
            "current_stage": None,
            "stage_seconds": {},
            "node": None,
            "nodes": None,
            "correctness": None,
            "bandwidth": [],
            "localize": [],
            "links": [],
            "loads": [],
            "hang": None,
            "error": None,
        }

    def save(self) -> None:
        if self.plan.result_path is None:
            return
        path = Path(self.plan.result_path)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, path)


def _read_node(plan: RankPlan) -> dict[str, Any]:
    from health.clocks import GpuProbe, read_gpus  # noqa: PLC0415
    from health.inventory import NodeFacts, software_versions  # noqa: PLC0415

    if plan.node_probe is not None:
        probe = GpuProbe.from_dict(plan.node_probe)
    else:
        probe = read_gpus(plan.host, visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
    return NodeFacts(
        plan.host, plan.node_rank, plan.local_world_size, probe, software_versions()
    ).to_dict()


def run_rank(plan: RankPlan, on_hang: Callable[[HangRecord], None] | None = None) -> dict[str, Any]:
    """Run every stage of one rank.

    Args:
        plan: the rank's plan.
        on_hang: extra callback when a stage hangs (Slurm mode prints the record);
            the state file is written either way. The process then exits ``EXIT_HANG``.

    Returns:
        The rank state (``results.collect_results`` input). A stage exception is
        recorded under ``error`` and ends the remaining stages.
    """
    import torch  # noqa: PLC0415 - rank processes only
    import torch.distributed as dist  # noqa: PLC0415

    from health import collectives  # noqa: PLC0415
    from health.judge import busbw_status  # noqa: PLC0415

    crit: Criteria = criteria_from_mapping(plan.criteria, source=plan.criteria.get("source", ""))
    dl = crit.deadlines
    col = crit.collectives
    state = _State(plan)
    fault = parse_fault(plan.fault)

    def hang(record: HangRecord) -> None:
        state.data["hang"] = dataclasses.asdict(record)
        state.save()
        if on_hang is not None:
            on_hang(record)

    watchdog = StageWatchdog(rank=plan.rank, host=plan.host, on_hang=hang)

    def stage(name: str, deadline_s: float, body: Callable[[], None]) -> bool:
        state.data["current_stage"] = name
        state.save()
        t0 = time.perf_counter()
        try:
            with watchdog.stage(name, deadline_s):
                body()
        except Exception as exc:  # noqa: BLE001 - any failure is a FAIL record
            logger.exception("rank=%d stage=%s failed", plan.rank, name)
            state.data["error"] = {
                "stage": name,
                "rank": plan.rank,
                "host": plan.host,
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            state.save()
            return False
        state.data["stage_seconds"][name] = time.perf_counter() - t0
        state.save()
        return True

    state.save()
    if plan.local_rank == 0 and not stage(
        "probe", dl.probe_s, lambda: state.data.__setitem__("node", _read_node(plan))
    ):
        return state.data

    ctx: dict[str, Any] = {}

    def rendezvous() -> None:
        pg_timeout = datetime.timedelta(seconds=2 * max(dataclasses.astuple(dl)) + 60)
        dist.init_process_group(
            plan.backend, rank=plan.rank, world_size=plan.world_size, timeout=pg_timeout
        )
        if plan.backend == "nccl":
            torch.cuda.set_device(plan.local_rank)
            ctx["device"] = torch.device("cuda", plan.local_rank)
            ctx["objects"] = dist.new_group(backend="gloo")
        else:
            ctx["device"] = torch.device("cpu")
            ctx["objects"] = None

    if not stage("rendezvous", dl.rendezvous_s, rendezvous):
        return state.data
    device = ctx["device"]

    if fault is not None and fault[0] == "never_join" and fault[1] == plan.rank:
        logger.warning("rank=%d fault injection: never joining the first collective", plan.rank)
        while True:
            time.sleep(3600)

    def correctness() -> None:
        state.data["correctness"] = dataclasses.asdict(collectives.check_correctness(device))

    def gather_nodes() -> None:
        got: list[Any] = [None] * plan.world_size
        dist.all_gather_object(got, state.data["node"], group=ctx["objects"])
        state.data["nodes"] = [n for n in got if n]

    def bandwidth() -> None:
        dtype = getattr(torch, col.dtype)
        for op in col.ops:
            if plan.world_size < 2 and op != "all_reduce":
                continue
            res = collectives.measure_bandwidth(
                op,
                num_elements=col.num_elements,
                dtype=dtype,
                device=device,
                warmup_iters=col.warmup_iters,
                timed_iters=col.timed_iters,
                group_ranks=range(plan.world_size),
            )
            state.data["bandwidth"].append(res.to_dict())
            state.save()

    def localize() -> None:
        rounds = collectives.localization_groups(plan.world_size, plan.local_world_size)
        mine = collectives.localize(
            "all_reduce",
            rounds=rounds,
            num_elements=col.num_elements,
            dtype=getattr(torch, col.dtype),
            device=device,
            warmup_iters=col.warmup_iters,
            timed_iters=max(8, col.timed_iters // 4),
        )
        got: list[Any] = [None] * plan.world_size
        dist.all_gather_object(got, [m.to_dict() for m in mine], group=ctx["objects"])
        seen = set()
        for per_rank in got:
            for item in per_rank or ():
                if tuple(item["group"]) not in seen:
                    seen.add(tuple(item["group"]))
                    state.data["localize"].append(item)

    def links() -> None:
        from health.links import measure_links  # noqa: PLC0415

        hosts: list[Any] = [None] * plan.world_size
        dist.all_gather_object(hosts, plan.host, group=ctx["objects"])
        mine = measure_links(rank=plan.rank, ranks_per_node=plan.local_world_size,
                             num_nodes=plan.num_nodes, hosts=hosts[::plan.local_world_size],
                             device=device)
        got: list[Any] = [None] * plan.world_size
        dist.all_gather_object(got, mine, group=ctx["objects"])
        state.data["links"] = [x for per_rank in got for x in per_rank or ()]

    def load() -> None:
        from health.load import run_gemm_load  # noqa: PLC0415

        sampler, index, err, uuid = None, None, None, None
        try:
            from health.nvml import NvmlSampler  # noqa: PLC0415

            uuid = "GPU-" + str(torch.cuda.get_device_properties(device).uuid)
            sampler = NvmlSampler(uuid)
            index = sampler.index
        except (RuntimeError, AttributeError) as exc:
            err = f"{type(exc).__name__}: {exc}"
        try:
            res = run_gemm_load(
                device=device,
                seconds=crit.load.seconds,
                matrix_size=crit.load.matrix_size,
                sample=None if sampler is None else sampler.sample,
                sample_interval_s=crit.load.sample_interval_s,
                host=plan.host,
                rank=plan.rank,
                gpu_uuid=uuid,
                gpu_index=index,
                sample_error=err,
            )
        finally:
            if sampler is not None:
                sampler.close()
        got: list[Any] = [None] * plan.world_size
        dist.all_gather_object(got, dataclasses.asdict(res), group=ctx["objects"])
        state.data["loads"] = got

    def gather_after() -> None:
        if plan.local_rank == 0 and state.data["node"] is not None:
            from health.clocks import read_gpus  # noqa: PLC0415

            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            state.data["node"]["gpus_after"] = read_gpus(plan.host, visible=visible).to_dict()
        gather_nodes()

    ok = (
        stage("correctness", dl.correctness_s, correctness)
        and stage("gather", dl.gather_s, gather_nodes)
        and stage("bandwidth", dl.bandwidth_s, bandwidth)
    )
    if ok and plan.num_nodes > 1:
        ok = stage("links", dl.bandwidth_s, links)
    if ok and col.localize_on_fail and plan.world_size > 2:
        failed = any(
            busbw_status(b["op"], b["busbw_gbps"], col)[0] == "FAIL"
            for b in state.data["bandwidth"]
        )
        if failed:
            ok = stage("localize", dl.bandwidth_s, localize)
    if ok and device.type == "cuda" and crit.load.enabled:
        ok = stage("load", dl.load_s, load)
    if ok:
        ok = stage("gather_after", dl.gather_s, gather_after)
    state.data["current_stage"] = "done" if ok else state.data["current_stage"]
    state.save()
    if dist.is_initialized():
        dist.destroy_process_group()
    return state.data


def main(argv: list[str]) -> int:
    """Rank entry point of the local launcher.

    Args:
        argv: ``[PLAN_JSON_PATH]``.

    Returns:
        ``EXIT_OK``, or ``EXIT_FAILED`` when a stage raised. A hang never returns:
        the watchdog ends the process with ``EXIT_HANG``.
    """
    from health.timeouts import enable_stack_dump_signal  # noqa: PLC0415

    plan_path = Path(argv[0])
    plan = RankPlan(**json.loads(plan_path.read_text()))
    logging.basicConfig(
        level=os.environ.get("AXBGATE_LOG_LEVEL", "WARNING"),
        format=f"%(asctime)s rank={plan.rank} %(name)s %(levelname)s %(message)s",
    )
    enable_stack_dump_signal(plan_path.with_suffix(".stack"))
    state = run_rank(plan)
    return EXIT_FAILED if state.get("error") else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
