"""Hypothesis properties of the verdict engine (issue 2: invariants)."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from orchestrator.verdict import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    get_policy,
    judge,
    measurement_from_pattern,
    run_statistics,
    verdict_from_medians,
)

median_s = st.floats(min_value=0.05, max_value=20.0, allow_nan=False, allow_infinity=False)
scale = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
policy_names = st.sampled_from(["drift", "ratio-ci", "sequential"])
kinds = st.sampled_from(["candidate", "regate"])
history_st = st.lists(st.tuples(median_s, median_s), min_size=0, max_size=8)
PCT_KEYS = ("drift_pct", "delta_pct", "threshold_pct")
STAT_KEYS = ("ratio_pct", "ci_low_pct", "ci_high_pct", "mde_pct", "run_sigma_pct")


def _near_boundary(d: dict) -> bool:
    """True when a decision input is within 1e-9 of its threshold (float rounding)."""
    values = [d["delta_pct"] - d["threshold_pct"], d["delta_pct"] + d["threshold_pct"],
              d["drift_pct"] - d["params"].get("max_drift_pct", math.inf)]
    if "ci_low_pct" in d:
        margin = d["threshold_pct"]
        values += [d["ci_low_pct"] - margin, d["ci_high_pct"] + margin, d["ci_low_pct"],
                   d["ci_high_pct"], d["ratio_pct"] - margin, d["ratio_pct"] + margin,
                   d["mde_pct"] - d["params"]["max_mde_pct"]]
    if d.get("history_check_f") is not None and d.get("history_check_critical") is not None:
        # the history check compares a variance ratio with an F quantile (e.g. exactly 1.0
        # against F(0.5; 1, 1) = 1.0 when gate and history spreads are equal)
        values.append(d["history_check_f"] - d["history_check_critical"])
    return any(abs(v) < 1e-9 for v in values)


@settings(max_examples=300, deadline=None)
@given(a=median_s, x=median_s, b=median_s, name=policy_names, kind=kinds, hist=history_st)
def test_swapping_a_and_b_changes_nothing(a, x, b, name, kind, hist) -> None:
    history = ControlHistory(pairs=hist)
    v1 = verdict_from_medians(a, x, b, kind=kind, policy=name, history=history)
    v2 = verdict_from_medians(b, x, a, kind=kind, policy=name, history=history)
    d1, d2 = v1.to_dict(), v2.to_dict()
    for key in ("brackets",):
        d1.pop(key), d2.pop(key)
    if name == "sequential":
        # least squares sums the swapped runs in another order: equal up to rounding
        assume(not _near_boundary(d1))
        for key in list(d1):
            if isinstance(d1[key], float) and isinstance(d2[key], float):
                assert math.isclose(d1[key], d2[key], rel_tol=1e-9, abs_tol=1e-9), key
                d1.pop(key), d2.pop(key)
        d1.pop("reason"), d2.pop("reason")
    assert d1 == d2


@settings(max_examples=300, deadline=None)
@given(a=median_s, x=median_s, b=median_s, k=scale, name=policy_names, kind=kinds,
       hist=history_st)
def test_scaling_all_times_leaves_percentages_and_verdict(a, x, b, k, name, kind, hist) -> None:
    v1 = verdict_from_medians(a, x, b, kind=kind, policy=name, history=ControlHistory(pairs=hist))
    scaled_hist = ControlHistory(pairs=[(p * k, q * k) for p, q in hist])
    v2 = verdict_from_medians(a * k, x * k, b * k, kind=kind, policy=name, history=scaled_hist)
    d1, d2 = v1.to_dict(), v2.to_dict()
    for key in PCT_KEYS + (STAT_KEYS if name != "drift" else ()):
        assert math.isclose(d1[key], d2[key], rel_tol=1e-9, abs_tol=1e-9), key
    assert math.isclose(d2["midpoint_s"], k * d1["midpoint_s"], rel_tol=1e-12)
    assert math.isclose(d2["delta_ms"], k * d1["delta_ms"], rel_tol=1e-9, abs_tol=1e-9)
    assume(not _near_boundary(d1))
    assert d1["verdict"] == d2["verdict"]


@settings(max_examples=300, deadline=None)
@given(a=median_s, x=median_s, b=median_s, numerator=st.floats(0.01, 100.0),
       lb=st.integers(1, 8), ga=st.integers(1, 8))
def test_mfu_points_sign_is_opposite_to_delta(a, x, b, numerator, lb, ga) -> None:
    v = verdict_from_medians(a, x, b, mfu_numerator_pct_s=numerator,
                             control_local_batch_size=lb, control_grad_accum_steps=ga,
                             candidate_local_batch_size=lb, candidate_grad_accum_steps=ga)
    assume(abs(v.delta_pct) > 1e-9)
    assert (v.mfu_points > 0) == (v.delta_ms < 0)
    assert math.isclose(v.mfu_control_pct, numerator * lb * ga / v.midpoint_s, rel_tol=1e-12)
    assert (v.throughput_candidate > v.throughput_control) == (v.delta_ms < 0)


@settings(max_examples=200, deadline=None)
@given(meds=st.lists(median_s, min_size=5, max_size=5),
       name=st.sampled_from(["drift", "ratio-ci"]))
def test_reversing_a_long_pattern_changes_nothing(meds, name) -> None:
    # Not for `sequential`: its looks are prefixes in time order, so reversing the
    # runs changes what was known at the first look.
    pattern = "AXBXA"
    v1 = judge(measurement_from_pattern(pattern, meds), get_policy(name))
    v2 = judge(measurement_from_pattern(pattern, meds[::-1]), get_policy(name))
    for key in ("midpoint_s", "candidate_s", "drift_pct", "delta_pct"):
        assert math.isclose(getattr(v1, key), getattr(v2, key), rel_tol=1e-12)
    assert v1.verdict == v2.verdict or _near_boundary(v1.to_dict())


@settings(max_examples=200, deadline=None)
@given(a=median_s, x=median_s, b=median_s, name=policy_names)
def test_candidate_verdict_is_monotone_in_x(a, x, b, name) -> None:
    """A faster candidate never gets a worse candidate verdict (same controls)."""
    rank = {"reject": 0, "neutral": 1, "inconclusive": 1, "accept": 2}
    faster = x * 0.9
    v_slow = verdict_from_medians(a, x, b, policy=name)
    v_fast = verdict_from_medians(a, faster, b, policy=name)
    assert rank[v_fast.verdict] >= rank[v_slow.verdict]


@settings(max_examples=200, deadline=None)
@given(ranks=st.lists(st.lists(median_s, min_size=6, max_size=6), min_size=1, max_size=4),
       warmup=st.integers(0, 5))
def test_run_statistics_median_is_within_measured_slowest(ranks, warmup) -> None:
    stats = run_statistics(ranks, num_warmup_steps=warmup)
    slowest = [max(col) for col in zip(*ranks)][warmup:]
    assert min(slowest) <= stats.median_step_s <= max(slowest)
    assert stats.num_measured_steps == len(slowest)


def test_runs_keep_pattern_order_in_brackets() -> None:
    runs = tuple(RunSummary(role=r, order=2 * i, median_step_s=1.0 + i / 100)
                 for i, r in enumerate("AXBXA"))
    v = judge(GateMeasurement(runs=runs), get_policy("drift"))
    assert [b.candidate_order for b in v.brackets] == [2, 6]
