"""Drift policy: DESIGN.md section 3 worked examples and every branch."""

from __future__ import annotations

import json

import pytest

from orchestrator.verdict import (
    GateMeasurement,
    RunSummary,
    get_policy,
    judge,
    measurement_from_pattern,
    verdict_from_medians,
)

# DESIGN.md section 3, worked examples, verbatim (seconds; ms; percent).
WORKED_EXAMPLES = [
    (0.4284051351, 0.4148231971, 0.4264598510, 0.42743249305, -12.609296, -2.950009, 0.455109,
     "accept"),
    (0.435652742, 0.434923236, 0.440625450, 0.438139096, -3.215860, -0.733982, 1.134961,
     "neutral"),
]


@pytest.mark.parametrize(
    ("a", "x", "b", "midpoint", "delta_ms", "delta_pct", "drift_pct", "expected"), WORKED_EXAMPLES
)
def test_design_worked_examples(a, x, b, midpoint, delta_ms, delta_pct, drift_pct, expected):
    # `--policy drift`: the campaign rule, no longer the default primary policy (issue 12).
    v = verdict_from_medians(a, x, b, policy="drift")
    assert v.midpoint_s == pytest.approx(midpoint, abs=1e-6)
    assert v.delta_ms == pytest.approx(delta_ms, abs=1e-6)
    assert v.delta_pct == pytest.approx(delta_pct, abs=1e-6)
    assert v.drift_pct == pytest.approx(drift_pct, abs=1e-6)
    assert v.verdict == expected
    d = json.loads(json.dumps(v.to_dict(), allow_nan=False))
    assert d["policy"] == "drift" and d["policy_version"] == "1"
    assert d["params"] == {"max_drift_pct": 2.0, "min_effect_pct": 0.0, "tolerance_pct": 0.5}
    assert d["midpoint_s"] == pytest.approx(midpoint, abs=1e-6)
    assert d["threshold_pct"] == pytest.approx(drift_pct, abs=1e-6)
    assert d["verdict"] == expected


def test_worked_example_mfu_and_throughput_at_midpoint() -> None:
    v = verdict_from_medians(
        0.4284051351, 0.4148231971, 0.4264598510, mfu_numerator_pct_s=5.0,
        control_local_batch_size=2, control_grad_accum_steps=3,
        candidate_local_batch_size=2, candidate_grad_accum_steps=3, policy="drift",
    )
    assert v.mfu_candidate_pct == pytest.approx(5.0 * 6 / 0.4148231971)
    assert v.mfu_control_pct == pytest.approx(5.0 * 6 / 0.42743249305)
    assert v.mfu_points == pytest.approx(v.mfu_candidate_pct - v.mfu_control_pct)
    assert v.mfu_points > 0
    assert v.throughput_candidate == pytest.approx(6 / 0.4148231971)
    assert v.throughput_control == pytest.approx(6 / 0.42743249305)
    assert v.throughput_scope == "rank"


def test_no_numerator_gives_no_mfu() -> None:
    d = verdict_from_medians(1.0, 0.9, 1.0).to_dict()
    assert d["mfu_candidate_pct"] is None and d["mfu_points"] is None


def test_throughput_uses_world_size_when_recorded() -> None:
    runs = tuple(
        RunSummary(role=r, order=i, median_step_s=m, world_size=8, local_batch_size=1)
        for i, (r, m) in enumerate(zip("AXB", (2.0, 1.0, 2.0)))
    )
    v = judge(GateMeasurement(runs=runs), get_policy("drift"))
    assert v.throughput_scope == "allocation"
    assert v.throughput_control == pytest.approx(4.0)
    assert v.throughput_candidate == pytest.approx(8.0)


@pytest.mark.parametrize(
    ("a", "x", "b", "params", "expected"),
    [
        (1.00, 0.98, 1.01, {}, "accept"),  # drift 0.995% < |delta| 1.99%
        (1.00, 1.03, 1.01, {}, "reject"),
        (1.00, 1.00, 1.01, {}, "neutral"),  # delta -0.5% inside drift 0.995%
        (1.00, 0.90, 1.03, {}, "inconclusive"),  # drift 2.96% > 2%
        (1.00, 0.90, 1.03, {"max_drift_pct": 3.0}, "accept"),
        (1.00, 0.99, 1.00, {}, "accept"),  # zero drift, -1%
        (1.00, 0.99, 1.00, {"min_effect_pct": 1.5}, "neutral"),
        (1.00, 1.01, 1.00, {"min_effect_pct": 1.5}, "neutral"),
        (1.00, 1.02, 1.00, {"min_effect_pct": 1.5}, "reject"),
        (1.00, 1.00, 1.00, {}, "neutral"),
    ],
)
def test_candidate_branches(a, x, b, params, expected) -> None:
    v = verdict_from_medians(a, x, b, policy=get_policy("drift", **params))
    assert v.verdict == expected, v.reason


def test_threshold_is_max_of_drift_and_min_effect() -> None:
    v = verdict_from_medians(1.0, 0.99, 1.0, policy=get_policy("drift", min_effect_pct=0.7))
    assert v.threshold_pct == 0.7
    v = verdict_from_medians(1.0, 0.9, 1.01, policy=get_policy("drift", min_effect_pct=0.7))
    assert v.threshold_pct == pytest.approx(0.01 / 1.005 * 100)


def test_delta_exactly_at_threshold_is_neutral() -> None:
    # midpoint 1.5, drift 1/1.5, delta -1/1.5: not strictly beyond the threshold.
    v = verdict_from_medians(1.0, 0.5, 2.0, policy=get_policy("drift", max_drift_pct=100.0))
    assert v.delta_pct == pytest.approx(-v.drift_pct)
    assert v.verdict == "neutral"


@pytest.mark.parametrize(
    ("a", "x", "b", "params", "expected"),
    [
        (1.00, 1.004, 1.00, {}, "pass"),  # 0.4% <= tolerance 0.5%
        (1.00, 1.006, 1.00, {}, "regression"),
        (1.00, 0.994, 1.00, {}, "improvement"),
        (1.00, 1.006, 1.00, {"tolerance_pct": 1.0}, "pass"),
        (1.00, 1.009, 1.01, {}, "pass"),  # delta 0.4% with drift 1%
        (1.00, 1.02, 1.01, {}, "regression"),  # drift 0.995% < delta 1.49%
        (1.00, 0.99, 1.05, {}, "pass"),  # delta -3.4% inside drift 4.9%
    ],
)
def test_regate_branches(a, x, b, params, expected) -> None:
    v = verdict_from_medians(a, x, b, kind="regate", policy=get_policy("drift", **params))
    assert v.verdict == expected, v.reason
    assert v.threshold_pct == pytest.approx(max(v.drift_pct, get_policy("drift", **params)
                                                .tolerance_pct))


def test_regate_ignores_max_drift() -> None:
    v = verdict_from_medians(1.0, 1.2, 1.05, kind="regate", policy="drift")
    assert v.drift_pct > 2.0
    assert v.verdict == "regression"


def test_failed_run_gives_failed_with_reason() -> None:
    runs = (
        RunSummary(role="A", order=0, median_step_s=1.0),
        RunSummary(role="X", order=1, median_step_s=float("nan"), failed=True,
                   failure_reason="non-finite loss at step 12"),
        RunSummary(role="B", order=2, median_step_s=1.0),
    )
    for name in ("drift", "ratio-ci", "sequential"):
        v = judge(GateMeasurement(runs=runs), get_policy(name))
        assert v.verdict == "failed"
        assert "non-finite loss at step 12" in v.reason and "order 1" in v.reason
        d = json.loads(json.dumps(v.to_dict(), allow_nan=False))
        assert d["midpoint_s"] is None and d["delta_pct"] is None
        assert d["policy"] == name


def test_health_failure_wins_over_numbers() -> None:
    m = measurement_from_pattern(
        "AXB", [1.0, 0.5, 1.0], health_failed=True, health_failure_reason="fabric clique 0x7ffe"
    )
    v = judge(m, get_policy("drift"))
    assert v.verdict == "failed"
    assert "health gate failed: fabric clique 0x7ffe" == v.reason


def test_failed_regate_is_failed() -> None:
    m = measurement_from_pattern("AXB", [1.0, 1.0, 1.0], kind="regate", health_failed=True)
    assert judge(m, get_policy("drift")).verdict == "failed"
