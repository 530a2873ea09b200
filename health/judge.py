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

import dataclasses
import logging
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from health.clocks import GpuProbe, nvlink_error_deltas
from health.collectives import BandwidthResult
from health.criteria import ClockCriteria, CollectiveCriteria, Criteria
from health.fabric import FabricObservation, group_domains, observe_fabric
from health.readings import GpuReading
from health.results import GateResults

logger = logging.getLogger(__name__)

PASS, WARN, FAIL, HANG = "PASS", "WARN", "FAIL", "HANG"
HEALTHY, DEGRADED, FAILED = "healthy", "degraded", "failed"
_RANK = {PASS: 0, WARN: 1, FAIL: 2, HANG: 3}

#: Stage -> the check its hang or error is reported under.
STAGE_CHECKS: dict[str, str] = {
    "probe": "inventory",
    "rendezvous": "rendezvous",
    "correctness": "collective_correctness",
    "gather": "gather",
    "bandwidth": "busbw",
    "localize": "busbw_localize",
    "load": "load",
    "gather_after": "gather",
}


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """One judged check: one ``AXBGATE_HEALTH`` record."""

    check: str
    status: str
    message: str = ""
    measured: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    threshold: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    host: str | None = None
    gpu_index: int | None = None
    duration_s: float | None = None
    stack_dump: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The record-contract object (docs/record-contract.md, ``AXBGATE_HEALTH``).

        Returns:
            ``{"v": 1, "check", "status", ...}`` with empty optional keys left out.
        """
        out: dict[str, Any] = {"v": 1, "check": self.check, "status": self.status}
        for key in ("measured", "threshold"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key))
        for key in ("message", "host", "gpu_index", "duration_s", "stack_dump"):
            value = getattr(self, key)
            if value not in (None, ""):
                out[key] = value
        return out


def worst(statuses: Sequence[str]) -> str:
    """The most severe status (HANG > FAIL > WARN > PASS).

    Args:
        statuses: statuses; empty counts as PASS.

    Returns:
        The worst one.
    """
    return max(statuses, key=_RANK.__getitem__, default=PASS)


def allocation_verdict(checks: Sequence[CheckOutcome]) -> str:
    """Allocation verdict from the checks.

    Args:
        checks: every judged check.

    Returns:
        ``failed`` (any FAIL/HANG), ``degraded`` (any WARN) or ``healthy``.
    """
    status = worst([c.status for c in checks])
    return {PASS: HEALTHY, WARN: DEGRADED}.get(status, FAILED)


def classify_clock_bin(max_sm_clock_mhz: int | None, clocks: ClockCriteria) -> str:
    """Which clock bin a max SM clock belongs to.

    Args:
        max_sm_clock_mhz: the GPU's max SM clock, MHz (None = unreadable).
        clocks: the criteria's bins and tolerance.

    Returns:
        ``healthy``, ``degraded``, ``unknown`` (no bin matches) or ``unreadable``.
    """
    if max_sm_clock_mhz is None:
        return "unreadable"
    tol = clocks.tolerance_mhz
    if any(abs(max_sm_clock_mhz - b) <= tol for b in clocks.healthy_max_sm_mhz):
        return "healthy"
    if any(abs(max_sm_clock_mhz - b) <= tol for b in clocks.degraded_max_sm_mhz):
        return "degraded"
    return "unknown"


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


def _gpu_checks(probe: GpuProbe, after: GpuProbe | None, c: Criteria) -> list[CheckOutcome]:
    out: list[CheckOutcome] = []
    deltas = nvlink_error_deltas(probe.readings, after.readings if after else ())
    for g in probe.readings:
        out.extend(_one_gpu(g, probe.host, probe.source, deltas.get(g.index), c))
    return out


def _one_gpu(
    g: GpuReading, host: str, source: str | None, delta: Mapping[str, int] | None, c: Criteria
) -> list[CheckOutcome]:
    def chk(name: str, status: str, msg: str, measured: dict, threshold: dict | None = None):
        measured = {**measured, "reader": source}
        return CheckOutcome(name, status, msg, measured, threshold or {}, host, g.index)

    out = []
    gp, ck = c.gpu, c.clocks
    busy = g.num_compute_processes
    idle_bad = FAIL if gp.idle_policy == "fail" else WARN
    out.append(
        chk("gpu_idle", WARN, "compute processes unreadable", {})
        if busy is None
        else chk(
            "gpu_idle",
            idle_bad if busy else PASS,
            f"{busy} foreign compute process(es): {list(g.compute_pids)}" if busy else "idle",
            {"num_compute_processes": busy},
            {"max_compute_processes": 0},
        )
    )
    bin_ = classify_clock_bin(g.max_sm_clock_mhz, ck)
    status = {"healthy": PASS, "degraded": WARN, "unreadable": WARN}.get(bin_, FAIL)
    out.append(
        chk(
            "clock_bin",
            status,
            f"max SM clock {g.max_sm_clock_mhz} MHz: {bin_} bin",
            {"max_sm_clock_mhz": g.max_sm_clock_mhz, "sm_clock_mhz": g.sm_clock_mhz,
             "clock_bin": bin_},
            {"healthy_max_sm_mhz": list(ck.healthy_max_sm_mhz),
             "degraded_max_sm_mhz": list(ck.degraded_max_sm_mhz),
             "tolerance_mhz": ck.tolerance_mhz},
        )
    )
    expected = ck.power_limit_w if ck.power_limit_w is not None else g.default_power_limit_w
    if g.power_limit_w is None or expected is None:
        out.append(chk("power_limit", WARN, "power limit unreadable", {}))
    else:
        floor = expected * (1 - ck.power_limit_tolerance_pct / 100)
        low = g.power_limit_w < floor
        out.append(
            chk(
                "power_limit",
                WARN if low else PASS,
                f"enforced {g.power_limit_w:.0f} W vs expected {expected:.0f} W",
                {"power_limit_w": g.power_limit_w,
                 "default_power_limit_w": g.default_power_limit_w},
                {"min_power_limit_w": floor},
            )
        )
    if g.clock_event_reasons is None:
        out.append(chk("clock_events", WARN, "clock-event reasons unreadable", {}))
    else:
        bad = sorted(set(g.clock_event_reasons) & set(ck.fail_reasons))
        out.append(
            chk(
                "clock_events",
                FAIL if bad else PASS,
                f"active at idle: {bad}" if bad else "no slowdown reason active at idle",
                {"active": list(g.clock_event_reasons)},
                {"fail_reasons": list(ck.fail_reasons)},
            )
        )
    vol, agg = g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate
    if vol is None and agg is None:
        out.append(chk("ecc", WARN, "ECC counters unreadable", {}))
    else:
        status = FAIL if (vol or 0) > 0 else WARN if (agg or 0) > 0 else PASS
        out.append(
            chk("ecc", status, f"uncorrected volatile={vol} aggregate={agg}",
                {"uncorrected_volatile": vol, "uncorrected_aggregate": agg})
        )
    if g.remapped_rows_pending is None and g.remapped_rows_failure is None:
        out.append(chk("remapped_rows", WARN, "remapped rows unreadable", {}))
    else:
        status = FAIL if g.remapped_rows_failure else WARN if g.remapped_rows_pending else PASS
        out.append(
            chk("remapped_rows", status,
                f"failure={g.remapped_rows_failure} pending={g.remapped_rows_pending}",
                {"uncorrectable": g.remapped_rows_uncorrectable,
                 "pending": g.remapped_rows_pending, "failure": g.remapped_rows_failure})
        )
    if g.recovery_action is None:
        out.append(chk("recovery_action", WARN, "recovery action unreadable", {}))
    else:
        ok = g.recovery_action in gp.allowed_recovery_actions
        out.append(
            chk("recovery_action", PASS if ok else FAIL, f"recovery action {g.recovery_action}",
                {"recovery_action": g.recovery_action},
                {"allowed": list(gp.allowed_recovery_actions)})
        )
    out.append(_nvlink(g, delta, c, chk))
    return out


def _nvlink(g: GpuReading, delta: Mapping[str, int] | None, c: Criteria, chk: Any) -> CheckOutcome:
    need = c.gpu.min_nvlink_active_links
    if need is None:
        return chk("nvlink", PASS, "no NVLink requirement", {"active_links": g.nvlink_active_links})
    if g.nvlink_active_links is None:
        return chk("nvlink", WARN, "NVLink state unreadable", {}, {"min_active_links": need})
    grew = {k: v for k, v in (delta or {}).items() if v > 0}
    measured = {"active_links": g.nvlink_active_links, "error_deltas": dict(delta or {})}
    threshold = {"min_active_links": need, "max_error_delta": 0}
    if g.nvlink_active_links < need:
        return chk("nvlink", FAIL, f"{g.nvlink_active_links} of {need} links active", measured,
                   threshold)
    if grew:
        status = FAIL if c.gpu.nvlink_error_delta_policy == "fail" else WARN
        return chk("nvlink", status, f"error counters grew during the gate: {grew}", measured,
                   threshold)
    return chk("nvlink", PASS, f"{g.nvlink_active_links} links active, no new errors", measured,
               threshold)


def _fabric_checks(obs: Sequence[FabricObservation], c: Criteria, num_nodes: int) -> list:
    issues: dict[tuple[str, int], list[tuple[str, str]]] = {(o.host, o.gpu_index): [] for o in obs}
    sentinel = set(c.fabric.sentinel_clique_ids)
    for o in obs:
        key, f = (o.host, o.gpu_index), o.fabric
        add = issues[key].append
        if f is None or f.state == "Not Supported":
            add((FAIL, "no fabric information") if c.fabric.required else (PASS, "no fabric"))
            continue
        if f.state != "Completed":
            add((FAIL if c.fabric.required else WARN, f"fabric state {f.state}"))
        elif f.status != "Success":
            add((FAIL, f"fabric state Completed with status {f.status}"))
        if num_nodes > 1 and f.cluster_uuid_is_zero:
            add((FAIL, "zero cluster UUID on a multi-node allocation"))
        if f.clique_id in sentinel:
            add((WARN, f"clique id {f.clique_id} ({f.clique_id:#x}) is a known sentinel"))
        h = f.health
        for name in ("route_unhealthy",):
            if h.get(name) == "true":
                add((FAIL, f"fabric health {name}"))
        for name in ("degraded_bw", "route_recovery", "access_timeout_recovery"):
            if h.get(name) == "true":
                add((WARN, f"fabric health {name}"))
        if h.get("incorrect_configuration") not in (None, "none", "not_supported"):
            add((FAIL, f"fabric incorrect configuration {h['incorrect_configuration']}"))
        if h.get("gfm_state") == "disconnected":
            add((FAIL, "fabric manager disconnected"))
        if h.get("summary") in ("unhealthy",):
            add((FAIL, "fabric health summary unhealthy"))
        elif h.get("summary") in ("limited_capacity",):
            add((WARN, "fabric health summary limited capacity"))
    # GPUs that must share one domain: the whole allocation on a required (MNNVL)
    # fabric, otherwise the GPUs of each node.
    scopes: dict[str, list[FabricObservation]] = {}
    for o in obs:
        scopes.setdefault("*" if c.fabric.required else o.host, []).append(o)
    for members in scopes.values():
        groups = group_domains(members)
        if len(groups) < 2:
            continue
        major = max(groups, key=lambda k: len(groups[k]))
        for dom, gpus in groups.items():
            if dom == major:
                continue
            for o in gpus:
                issues[(o.host, o.gpu_index)].append(
                    (FAIL, f"GPU {o.gpu_index} on {o.host}: fabric domain (cluster {dom[0]}, "
                     f"clique {dom[1]}) differs from (cluster {major[0]}, clique {major[1]}) "
                     f"of {len(groups[major])} other GPU(s)")
                )
    out = []
    for o in obs:
        found = issues[(o.host, o.gpu_index)]
        status = worst([s for s, _ in found])
        msgs = [m for s, m in found if s != PASS] or [m for _, m in found] or ["fabric ok"]
        f = o.fabric
        measured = {} if f is None else {
            "state": f.state, "status": f.status, "clique_id": f.clique_id,
            "cluster_uuid": f.cluster_uuid, "health": dict(f.health)}
        out.append(CheckOutcome("fabric", status, "; ".join(msgs), measured,
                                {"required": c.fabric.required}, o.host, o.gpu_index))
    return out


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
            checks += _gpu_checks(node.gpus, node.gpus_after, criteria)
        checks += _fabric_checks(
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
