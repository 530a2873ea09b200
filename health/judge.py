"""Pure judgement: gate results + criteria -> PASS/WARN/FAIL/HANG per check, and the
allocation verdict (DESIGN.md section 4.6).

No I/O, no clock, no torch. Rules:

- a check is HANG when its stage outlived its deadline, FAIL when the allocation must
  not run, WARN when runs may go ahead but results are not baseline-eligible (the
  degraded clock bin, the 0x7ffe clique sentinel, busbw between the warn and fail
  ratios, an unreadable fact the criteria expect), else PASS;
- allocation: ``failed`` if any check is FAIL or HANG, else ``degraded`` if any is
  WARN, else ``healthy`` ("baseline-eligible" needs every check passed, DESIGN.md 1).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import Any

from health.collectives import BandwidthResult
from health.criteria import CollectiveCriteria, Criteria
from health.fabric import observe_fabric
from health.gpu_rules import classify_clock_bin, fabric_checks, gpu_checks
from health.links import judge_links
from health.outcome import FAIL, HANG, PASS, WARN, CheckOutcome, worst
from health.results import GateResults

logger = logging.getLogger(__name__)

HEALTHY, DEGRADED, FAILED = "healthy", "degraded", "failed"

#: Stage -> the check its hang or error is reported under.
STAGE_CHECKS: dict[str, str] = {
    "probe": "inventory",
    "rendezvous": "rendezvous",
    "correctness": "collective_correctness",
    "gather": "gather",
    "bandwidth": "busbw",
    "localize": "busbw_localize",
    "links": "links",
    "load": "load",
    "gather_after": "gather",
}


def allocation_verdict(checks: Sequence[CheckOutcome]) -> str:
    """Allocation verdict from the checks.

    Args:
        checks: every judged check.

    Returns:
        ``failed`` (any FAIL/HANG), ``degraded`` (any WARN) or ``healthy``.
    """
    status = worst([c.status for c in checks])
    return {PASS: HEALTHY, WARN: DEGRADED}.get(status, FAILED)


def busbw_status(
    op: str, busbw: float, col: CollectiveCriteria
) -> tuple[str, dict[str, float], str]:
    """Judge one busbw against the criteria baseline.

    Args:
        op: collective name.
        busbw: measured slowest-rank busbw, GB/s.
        col: collective criteria (baseline, warn and fail ratios).

    Returns:
        (status, threshold mapping, message). Without a baseline: PASS, reported only.
    """
    base = col.baseline_busbw_gbps.get(op)
    if base is None:
        return PASS, {}, "no baseline in criteria: reported only"
    threshold = {
        "baseline_busbw_gbps": base,
        "warn_below_gbps": base * col.warn_ratio,
        "fail_below_gbps": base * col.fail_ratio,
    }
    ratio = busbw / base
    msg = f"{busbw:.1f} GB/s = {ratio:.1%} of baseline {base:.1f} GB/s"
    if busbw < base * col.fail_ratio:
        return FAIL, threshold, msg
    if busbw < base * col.warn_ratio:
        return WARN, threshold, msg
    return PASS, threshold, msg


def _inventory_checks(r: GateResults, c: Criteria) -> list[CheckOutcome]:
    out = []
    per_node = c.gpus_per_node
    for node in r.nodes:
        p = node.gpus
        models = sorted({g.name for g in p.readings})
        measured = {"gpu_models": models, "num_gpus": len(p.readings), "reader": p.source,
                    "num_local_ranks": node.num_local_ranks}
        if c.gpu_model is None:
            out.append(CheckOutcome("inventory", PASS, "CPU criteria: GPUs not required",
                                    measured, {}, node.host))
            continue
        problems = []
        if p.source is None:
            problems.append(f"cannot read GPUs: {p.error}")
        wrong = [g.index for g in p.readings if c.gpu_model.lower() not in g.name.lower()]
        if wrong:
            problems.append(f"GPUs {wrong} are not {c.gpu_model}: {models}")
        if per_node is not None and p.source is not None and len(p.readings) != per_node:
            problems.append(f"{len(p.readings)} GPUs, expected {per_node}")
        if p.source is not None and node.num_local_ranks != len(p.readings):
            problems.append(f"{node.num_local_ranks} ranks for {len(p.readings)} GPUs")
        out.append(CheckOutcome(
            "inventory", FAIL if problems else PASS, "; ".join(problems) or "as expected",
            measured, {"gpu_model": c.gpu_model, "gpus_per_node": per_node}, node.host))
    if c.num_nodes is not None and r.num_nodes != c.num_nodes:
        out.append(CheckOutcome("inventory", FAIL,
                                f"{r.num_nodes} nodes, criteria expect {c.num_nodes}",
                                {"num_nodes": r.num_nodes}, {"num_nodes": c.num_nodes}))
    return out


def _collective_checks(r: GateResults, c: Criteria) -> list[CheckOutcome]:
    out = []
    if "rendezvous" in r.stage_seconds:
        out.append(CheckOutcome("rendezvous", PASS, f"{r.world_size} ranks joined",
                                {"world_size": r.world_size, "backend": r.backend},
                                duration_s=r.stage_seconds["rendezvous"]))
    corr = r.correctness
    if corr is not None:
        out.append(CheckOutcome(
            "collective_correctness", PASS if corr.ok else FAIL,
            f"all-reduce of rank+1: expected {corr.expected}, observed {list(corr.observed)}",
            {"observed": list(corr.observed), "world_size": corr.world_size},
            {"expected": corr.expected}, duration_s=corr.duration_s))
    for b in r.bandwidth:
        if b.world_size < 2:
            status, threshold, msg = PASS, {}, "single rank: busbw undefined (factor 0)"
        else:
            status, threshold, msg = busbw_status(b.op, b.busbw_gbps, c.collectives)
        out.append(CheckOutcome(
            f"busbw_{b.op}", status, msg, _bw_measured(b), threshold,
            duration_s=b.slowest_rank_mean_s * (b.timed_iters + b.warmup_iters)))
    if r.localize:
        by_group = {",".join(map(str, b.group)): round(b.busbw_gbps, 2) for b in r.localize}
        med = statistics.median(by_group.values())
        slow = {g: v for g, v in by_group.items() if v < c.collectives.fail_ratio * med}
        out.append(CheckOutcome(
            "busbw_localize", FAIL if slow else WARN,
            f"slow rank groups {sorted(slow)} (busbw < {c.collectives.fail_ratio:.0%} of the "
            f"group median {med:.1f} GB/s)" if slow else "no single slow group found",
            {"busbw_gbps_by_group": by_group}, {"fail_below_gbps": c.collectives.fail_ratio * med}))
    if r.links:
        ok, named, message, measured = judge_links(r.links)
        out.append(CheckOutcome("links", PASS if ok else FAIL, message, measured,
                                {"fail_ratio": 0.25, "floor_gbps": 1.0}, ",".join(named) or None))
    return out


def _bw_measured(b: BandwidthResult) -> dict[str, Any]:
    return {
        "busbw_gbps": round(b.busbw_gbps, 3), "algbw_gbps": round(b.algbw_gbps, 3),
        "slowest_rank_bus_gbps": round(b.busbw_gbps, 3), "size_bytes": b.size_bytes,
        "dtype": b.dtype, "world_size": b.world_size, "backend": b.backend,
        "slowest_rank_mean_ms": round(b.slowest_rank_mean_s * 1e3, 4),
        "p50_ms": round(b.p50_ms, 4), "p95_ms": round(b.p95_ms, 4),
        "timed_iters": b.timed_iters, "warmup_iters": b.warmup_iters, "timer": b.timer,
    }


def _load_checks(r: GateResults, c: Criteria) -> list[CheckOutcome]:
    out = []
    ck = c.clocks
    for ld in r.loads:
        if ld is None:
            continue
        seen = sorted({x for s in ld.samples for x in (s.clock_event_reasons or ())})
        clocks = [s.sm_clock_mhz for s in ld.samples if s.sm_clock_mhz is not None]
        fail = sorted(set(seen) & set(ck.fail_reasons))
        warn = sorted(set(seen) & set(ck.warn_reasons))
        if not ld.samples:
            status, msg = WARN, f"no clock samples under load: {ld.error}"
        elif fail:
            status, msg = FAIL, f"under load: {fail}"
        elif warn:
            status, msg = WARN, f"under load: {warn}"
        else:
            status, msg = PASS, "no slowdown reason under load"
        out.append(CheckOutcome(
            "load", status, msg,
            {"tflops": round(ld.tflops, 1), "seconds": round(ld.seconds, 3),
             "num_samples": len(ld.samples), "reasons_seen": seen,
             "sm_clock_mhz_min": min(clocks, default=None),
             "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
             "rank": ld.rank},
            {"fail_reasons": list(ck.fail_reasons), "warn_reasons": list(ck.warn_reasons)},
            ld.host, ld.gpu_index, ld.seconds))
    return out


def _failure_checks(r: GateResults) -> list[CheckOutcome]:
    out = []
    terminated = [x for x in r.rank_exits if x.terminated and x.stack_dump]
    for h in r.hangs:
        dump = h.stack_dump
        for x in terminated:
            if x.rank != h.rank:
                dump += f"\n--- rank {x.rank} (pid {x.pid}) terminated by the launcher ---\n"
                dump += x.stack_dump
        out.append(CheckOutcome(
            STAGE_CHECKS.get(h.stage, h.stage), HANG,
            f"rank {h.rank} stage {h.stage} exceeded its {h.deadline_s:.0f} s deadline "
            f"(detected by {h.detected_by}); other ranks terminated",
            {"rank": h.rank, "stage": h.stage}, {"deadline_s": h.deadline_s}, h.host,
            duration_s=h.deadline_s, stack_dump=dump))
    for e in r.errors:
        out.append(CheckOutcome(
            STAGE_CHECKS.get(e.stage, e.stage), FAIL, f"rank {e.rank}: {e.message}",
            {"rank": e.rank, "stage": e.stage}, {}, e.host, stack_dump=e.traceback or None))
    return out


def _network_checks(r: GateResults) -> list[CheckOutcome]:
    out = []
    for n in r.network:
        measured = {"interface": n.interface, "master_addr": n.master_addr,
                    "master_port": n.master_port, "hostname_addresses": list(n.hostname_addresses),
                    "num_nodes": n.num_nodes}
        if n.error:
            out.append(CheckOutcome("network", FAIL, n.error, measured, {}, n.host))
        elif n.hostname_is_loopback and n.num_nodes > 1:
            out.append(CheckOutcome(
                "network", WARN, f"hostname {n.host} resolves to loopback "
                f"{list(n.hostname_addresses)}; MASTER_ADDR uses raw IP {n.master_addr} "
                f"({n.reason})", measured, {}, n.host))
        else:
            out.append(CheckOutcome("network", PASS, n.reason, measured, {}, n.host))
    return out


def judge(results: GateResults, criteria: Criteria) -> tuple[CheckOutcome, ...]:
    """Judge every check of a gate.

    Args:
        results: the gate's measurements.
        criteria: the topology's criteria.

    Returns:
        The checks in stage order: network, inventory, per-GPU state, fabric,
        rendezvous and collectives, load, then hangs and stage errors.
    """
    checks = _network_checks(results) + _inventory_checks(results, criteria)
    if criteria.gpu_model is not None:
        for node in results.nodes:
            checks += gpu_checks(node.gpus, node.gpus_after, criteria)
        checks += fabric_checks(
            observe_fabric([n.gpus for n in results.nodes]), criteria, results.num_nodes
        )
    checks += _collective_checks(results, criteria)
    checks += _load_checks(results, criteria)
    checks += _failure_checks(results)
    if not results.nodes and not results.hangs and not results.errors:
        checks.append(CheckOutcome("inventory", FAIL, "no rank reported node facts"))
    return tuple(checks)


def clock_bin_summary(results: GateResults, criteria: Criteria) -> tuple[str | None, int | None]:
    """The allocation's clock bin: the lowest max SM clock over its GPUs.

    Args:
        results: the gate's measurements.
        criteria: the topology's criteria.

    Returns:
        (bin name, lowest max SM clock MHz); (None, None) without GPU readings.
    """
    clocks = [g.max_sm_clock_mhz for n in results.nodes for g in n.gpus.readings
              if g.max_sm_clock_mhz is not None]
    if not clocks:
        return None, None
    low = min(clocks)
    return classify_clock_bin(low, criteria.clocks), low
