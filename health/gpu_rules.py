"""Per-GPU and fabric rules of the judge (pure; DESIGN.md 4.2-4.3, issue 4 check 2).

Each ``_rule_*`` maps one reading and the criteria to ``(status, message, measured,
threshold)``. A fact the criteria expect but the reader could not read is WARN
("unknown", STYLE.md "Errors"), never a silent PASS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from health.clocks import GpuProbe, nvlink_error_deltas
from health.criteria import ClockCriteria, Criteria
from health.fabric import FabricObservation, group_domains
from health.outcome import FAIL, PASS, WARN, CheckOutcome, worst
from health.readings import GpuReading

_Rule = tuple[str, str, dict[str, Any], dict[str, Any]]


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


def _rule_idle(g: GpuReading, c: Criteria) -> _Rule:
    busy = g.num_compute_processes
    if busy is None:
        return WARN, "compute processes unreadable", {}, {}
    bad = FAIL if c.gpu.idle_policy == "fail" else WARN
    msg = f"{busy} foreign compute process(es): {list(g.compute_pids)}" if busy else "idle"
    return (bad if busy else PASS), msg, {"num_compute_processes": busy}, {
        "max_compute_processes": 0}


def _rule_clock_bin(g: GpuReading, c: Criteria) -> _Rule:
    ck = c.clocks
    bin_ = classify_clock_bin(g.max_sm_clock_mhz, ck)
    status = {"healthy": PASS, "degraded": WARN, "unreadable": WARN}.get(bin_, FAIL)
    measured = {"max_sm_clock_mhz": g.max_sm_clock_mhz, "sm_clock_mhz": g.sm_clock_mhz,
                "clock_bin": bin_}
    threshold = {"healthy_max_sm_mhz": list(ck.healthy_max_sm_mhz),
                 "degraded_max_sm_mhz": list(ck.degraded_max_sm_mhz),
                 "tolerance_mhz": ck.tolerance_mhz}
    return status, f"max SM clock {g.max_sm_clock_mhz} MHz: {bin_} bin", measured, threshold


def _rule_power_limit(g: GpuReading, c: Criteria) -> _Rule:
    ck = c.clocks
    expected = ck.power_limit_w if ck.power_limit_w is not None else g.default_power_limit_w
    if g.power_limit_w is None or expected is None:
        return WARN, "power limit unreadable", {}, {}
    floor = expected * (1 - ck.power_limit_tolerance_pct / 100)
    measured = {"power_limit_w": g.power_limit_w,
                "default_power_limit_w": g.default_power_limit_w}
    return (WARN if g.power_limit_w < floor else PASS), (
        f"enforced {g.power_limit_w:.0f} W vs expected {expected:.0f} W"
    ), measured, {"min_power_limit_w": floor}


def _rule_clock_events(g: GpuReading, c: Criteria) -> _Rule:
    if g.clock_event_reasons is None:
        return WARN, "clock-event reasons unreadable", {}, {}
    bad = sorted(set(g.clock_event_reasons) & set(c.clocks.fail_reasons))
    msg = f"active at idle: {bad}" if bad else "no slowdown reason active at idle"
    return (FAIL if bad else PASS), msg, {"active": list(g.clock_event_reasons)}, {
        "fail_reasons": list(c.clocks.fail_reasons)}


def _rule_ecc(g: GpuReading, c: Criteria) -> _Rule:
    vol, agg = g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate
    if vol is None and agg is None:
        return WARN, "ECC counters unreadable", {}, {}
    status = FAIL if (vol or 0) > 0 else WARN if (agg or 0) > 0 else PASS
    return status, f"uncorrected volatile={vol} aggregate={agg}", {
        "uncorrected_volatile": vol, "uncorrected_aggregate": agg}, {}


def _rule_remapped_rows(g: GpuReading, c: Criteria) -> _Rule:
    if g.remapped_rows_pending is None and g.remapped_rows_failure is None:
        return WARN, "remapped rows unreadable", {}, {}
    status = FAIL if g.remapped_rows_failure else WARN if g.remapped_rows_pending else PASS
    return status, f"failure={g.remapped_rows_failure} pending={g.remapped_rows_pending}", {
        "uncorrectable": g.remapped_rows_uncorrectable, "pending": g.remapped_rows_pending,
        "failure": g.remapped_rows_failure}, {}


def _rule_recovery_action(g: GpuReading, c: Criteria) -> _Rule:
    if g.recovery_action is None:
        return WARN, "recovery action unreadable", {}, {}
    ok = g.recovery_action in c.gpu.allowed_recovery_actions
    return (PASS if ok else FAIL), f"recovery action {g.recovery_action}", {
        "recovery_action": g.recovery_action}, {"allowed": list(c.gpu.allowed_recovery_actions)}


def _rule_nvlink(g: GpuReading, c: Criteria, delta: Mapping[str, int] | None) -> _Rule:
    need = c.gpu.min_nvlink_active_links
    if need is None:
        return PASS, "no NVLink requirement", {"active_links": g.nvlink_active_links}, {}
    threshold = {"min_active_links": need, "max_error_delta": 0}
    if g.nvlink_active_links is None:
        return WARN, "NVLink state unreadable", {}, threshold
    grew = {k: v for k, v in (delta or {}).items() if v > 0}
    measured = {"active_links": g.nvlink_active_links, "error_deltas": dict(delta or {})}
    if g.nvlink_active_links < need:
        return FAIL, f"{g.nvlink_active_links} of {need} links active", measured, threshold
    if grew:
        status = FAIL if c.gpu.nvlink_error_delta_policy == "fail" else WARN
        return status, f"error counters grew during the gate: {grew}", measured, threshold
    return PASS, f"{g.nvlink_active_links} links active, no new errors", measured, threshold


_RULES = (
    ("gpu_idle", _rule_idle),
    ("clock_bin", _rule_clock_bin),
    ("power_limit", _rule_power_limit),
    ("clock_events", _rule_clock_events),
    ("ecc", _rule_ecc),
    ("remapped_rows", _rule_remapped_rows),
    ("recovery_action", _rule_recovery_action),
)


def gpu_checks(probe: GpuProbe, after: GpuProbe | None, c: Criteria) -> list[CheckOutcome]:
    """Judge every GPU of one node.

    Args:
        probe: the node's GPU read at the start of the gate.
        after: the read at the end (NVLink counter deltas), or None.
        c: criteria.

    Returns:
        One outcome per GPU and rule (idle, clock bin, power, clock events, ECC,
        remapped rows, recovery action, NVLink).
    """
    out = []
    deltas = nvlink_error_deltas(probe.readings, after.readings if after else ())
    for g in probe.readings:
        results = [(name, rule(g, c)) for name, rule in _RULES]
        results.append(("nvlink", _rule_nvlink(g, c, deltas.get(g.index))))
        for name, (status, msg, measured, threshold) in results:
            out.append(CheckOutcome(name, status, msg, {**measured, "reader": probe.source},
                                    threshold, probe.host, g.index))
    return out


def _fabric_issues(o: FabricObservation, c: Criteria, num_nodes: int) -> list[tuple[str, str]]:
    f = o.fabric
    if f is None or f.state == "Not Supported":
        return [(FAIL, "no fabric information") if c.fabric.required else (PASS, "no fabric")]
    issues = []
    if f.state != "Completed":
        issues.append((FAIL if c.fabric.required else WARN, f"fabric state {f.state}"))
    elif f.status != "Success":
        issues.append((FAIL, f"fabric state Completed with status {f.status}"))
    if num_nodes > 1 and f.cluster_uuid_is_zero:
        issues.append((FAIL, "zero cluster UUID on a multi-node allocation"))
    if f.clique_id in c.fabric.sentinel_clique_ids:
        issues.append((WARN, f"clique id {f.clique_id} ({f.clique_id:#x}) is a known sentinel"))
    h = f.health
    if h.get("route_unhealthy") == "true":
        issues.append((FAIL, "fabric health route_unhealthy"))
    for name in ("degraded_bw", "route_recovery", "access_timeout_recovery"):
        if h.get(name) == "true":
            issues.append((WARN, f"fabric health {name}"))
    if h.get("incorrect_configuration") not in (None, "none", "not_supported"):
        issues.append((FAIL, f"fabric incorrect configuration {h['incorrect_configuration']}"))
    if h.get("gfm_state") == "disconnected":
        issues.append((FAIL, "fabric manager disconnected"))
    if h.get("summary") == "unhealthy":
        issues.append((FAIL, "fabric health summary unhealthy"))
    elif h.get("summary") == "limited_capacity":
        issues.append((WARN, "fabric health summary limited capacity"))
    return issues


def fabric_checks(
    obs: Sequence[FabricObservation], c: Criteria, num_nodes: int
) -> list[CheckOutcome]:
    """Judge the fabric of every GPU (issue 4, "Fabric rules").

    State Completed with a status other than Success fails; a zero cluster UUID on a
    multi-node allocation fails; a sentinel clique id (0x7ffe) warns on its own; GPUs
    that must share a domain (the whole allocation on a required MNNVL fabric, else
    each node) but report a different (cluster UUID, clique id) fail, named.

    Args:
        obs: one observation per GPU.
        c: criteria.
        num_nodes: nodes in the allocation.

    Returns:
        One ``fabric`` outcome per GPU.
    """
    issues = {(o.host, o.gpu_index): _fabric_issues(o, c, num_nodes) for o in obs}
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
                     f"of {len(groups[major])} other GPU(s)"))
    out = []
    for o in obs:
        found = issues[(o.host, o.gpu_index)]
        msgs = [m for s, m in found if s != PASS] or [m for _, m in found] or ["fabric ok"]
        f = o.fabric
        measured = {} if f is None else {
            "state": f.state, "status": f.status, "clique_id": f.clique_id,
            "cluster_uuid": f.cluster_uuid, "health": dict(f.health)}
        out.append(CheckOutcome("fabric", worst([s for s, _ in found]), "; ".join(msgs),
                                measured, {"required": c.fabric.required}, o.host, o.gpu_index))
    return out
