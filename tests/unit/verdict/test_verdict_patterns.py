"""Long patterns (A X B X A ...), measurement validation and the policy registry."""

from __future__ import annotations

import pytest

from orchestrator.verdict import (
    POLICY_NAMES,
    ControlHistory,
    DriftPolicy,
    GateMeasurement,
    RatioCIPolicy,
    RunSummary,
    get_policy,
    judge,
    measurement_from_pattern,
)


def test_axbxa_brackets_midpoint_and_drift() -> None:
    a1, x1, b, x2, a2 = 1.00, 0.97, 1.02, 0.98, 1.01
    v = judge(measurement_from_pattern("AXBXA", [a1, x1, b, x2, a2]), get_policy("drift"))
    m1, m2 = (a1 + b) / 2, (b + a2) / 2
    midpoint = (m1 + m2) / 2
    assert v.midpoint_s == pytest.approx(midpoint)
    assert v.midpoint_s == pytest.approx((a1 + 2 * b + a2) / 4)
    assert v.candidate_s == pytest.approx((x1 + x2) / 2)
    assert v.drift_pct == pytest.approx((b - a1) / midpoint * 100)
    assert [br.candidate_order for br in v.brackets] == [1, 3]
    assert [(br.left_order, br.right_order) for br in v.brackets] == [(0, 2), (2, 4)]
    assert v.brackets[0].delta_pct == pytest.approx((x1 - m1) / m1 * 100)
    assert v.brackets[1].drift_pct == pytest.approx((b - a2) / m2 * 100)
    assert v.delta_ms == pytest.approx(((x1 - m1) + (x2 - m2)) / 2 * 1000)
    d = v.to_dict()
    assert d["num_candidate_copies"] == 2 and len(d["copy_deltas_pct"]) == 2
    assert d["pattern"] == "AXBXA" and d["num_runs"] == 5
    assert v.verdict == "accept"


def test_linear_trend_cancels_in_long_pattern() -> None:
    # Control and candidate identical, every run 0.3% slower than the previous one.
    medians = [1.0 * (1 + 0.003 * i) for i in range(5)]
    v = judge(measurement_from_pattern("AXBXA", medians), get_policy("drift"))
    assert v.delta_pct == pytest.approx(0.0, abs=1e-12)
    assert v.verdict == "neutral"


def test_sign_conflict_is_neutral_even_beyond_drift() -> None:
    medians = [1.00, 0.95, 1.00, 1.01, 1.00]
    v = judge(measurement_from_pattern("AXBXA", medians), get_policy("drift"))
    assert v.sign_conflict
    assert v.delta_pct < -v.drift_pct  # would be accept without the rule
    assert v.verdict == "neutral"
    assert "disagree in sign" in v.reason


def test_sign_conflict_regate_is_pass() -> None:
    medians = [1.00, 0.95, 1.00, 1.01, 1.00]
    v = judge(measurement_from_pattern("AXBXA", medians, kind="regate"), get_policy("drift"))
    assert v.verdict == "pass"


def test_consecutive_copies_share_bracket() -> None:
    v = judge(measurement_from_pattern("AXXB", [1.0, 0.9, 0.92, 1.0]), get_policy("drift"))
    assert [(b.left_order, b.right_order) for b in v.brackets] == [(0, 3), (0, 3)]
    assert v.midpoint_s == pytest.approx(1.0)
    assert v.verdict == "accept"


def test_axa_second_control_may_be_a() -> None:
    v = judge(measurement_from_pattern("AXA", [1.0, 0.9, 1.0]), get_policy("drift"))
    assert v.verdict == "accept"


def test_ba_order_is_symmetric() -> None:
    v1 = judge(measurement_from_pattern("AXB", [1.0, 0.98, 1.01]), get_policy("drift"))
    v2 = judge(measurement_from_pattern("BXA", [1.0, 0.98, 1.01]), get_policy("drift"))
    assert v1.to_dict()["delta_pct"] == v2.to_dict()["delta_pct"]


@pytest.mark.parametrize(
    ("pattern", "match"),
    [
        ("XAB", "control before it"),
        ("AX", "second control"),
        ("ABB", "candidate X"),
        ("BXB", "control A"),
    ],
)
def test_invalid_patterns(pattern, match) -> None:
    with pytest.raises(ValueError, match=match):
        measurement_from_pattern(pattern, [1.0] * len(pattern))


def test_trailing_candidate_copy_is_bracketed_by_the_last_control() -> None:
    # a sequential gate may stop after a "C X" pair: its last copy has no control after it
    v = judge(measurement_from_pattern("AXBX", [1.0, 0.98, 1.01, 0.99]), get_policy("drift"))
    last = v.brackets[-1]
    assert last.left_order == last.right_order == 2 and last.midpoint_s == pytest.approx(1.01)
    assert last.delta_pct == pytest.approx((0.99 / 1.01 - 1) * 100)
    assert v.brackets[0].left_order == 0 and v.brackets[0].right_order == 2


def test_measurement_validation_errors() -> None:
    runs = [RunSummary(role=r, order=i, median_step_s=1.0) for i, r in enumerate("AXB")]
    with pytest.raises(ValueError, match="pattern order"):
        GateMeasurement(runs=(runs[1], runs[0], runs[2]))
    with pytest.raises(ValueError, match="empty"):
        GateMeasurement(runs=())
    with pytest.raises(ValueError, match="kind"):
        GateMeasurement(runs=tuple(runs), kind="bisect")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mfu_numerator_pct_s"):
        GateMeasurement(runs=tuple(runs), mfu_numerator_pct_s=-1.0)
    with pytest.raises(ValueError, match="control_local_batch_size"):
        GateMeasurement(runs=tuple(runs), control_local_batch_size=0)
    with pytest.raises(ValueError, match="RunSummary"):
        GateMeasurement(runs=(runs[0], 1.0, runs[2]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lengths|has 3 runs"):
        measurement_from_pattern("AXB", [1.0, 1.0])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1.0", True])
def test_run_summary_rejects_bad_medians(bad) -> None:
    with pytest.raises(ValueError, match="median_step_s"):
        RunSummary(role="A", order=0, median_step_s=bad)


def test_run_summary_field_errors() -> None:
    with pytest.raises(ValueError, match="role"):
        RunSummary(role="C", order=0, median_step_s=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="order"):
        RunSummary(role="A", order=-1, median_step_s=1.0)
    with pytest.raises(ValueError, match="world_size"):
        RunSummary(role="A", order=0, median_step_s=1.0, world_size=0)
    failed = RunSummary(role="A", order=0, median_step_s=float("nan"), failed=True)
    assert failed.failed


def test_batch_resolution_from_runs_and_conflicts() -> None:
    runs = tuple(
        RunSummary(role=r, order=i, median_step_s=1.0, local_batch_size=lb, grad_accum_steps=2)
        for i, (r, lb) in enumerate(zip("AXB", (2, 4, 2)))
    )
    m = GateMeasurement(runs=runs)
    assert (m.control_local_batch_size, m.candidate_local_batch_size) == (2, 4)
    assert (m.control_grad_accum_steps, m.candidate_grad_accum_steps) == (2, 2)
    with pytest.raises(ValueError, match="contradicts"):
        GateMeasurement(runs=runs, candidate_local_batch_size=2)
    mixed = (runs[0], runs[1], RunSummary(role="B", order=2, median_step_s=1.0,
                                          local_batch_size=3))
    with pytest.raises(ValueError, match="disagree"):
        GateMeasurement(runs=mixed)
    default = measurement_from_pattern("AXB", [1.0, 1.0, 1.0])
    assert default.control_local_batch_size == 1 and default.candidate_grad_accum_steps == 1


def test_registry_names_and_defaults() -> None:
    assert POLICY_NAMES[0] == "drift" and "ratio-ci" in POLICY_NAMES
    assert get_policy("drift") == DriftPolicy(max_drift_pct=2.0, min_effect_pct=0.0,
                                              tolerance_pct=0.5)
    assert get_policy("ratio-ci") == RatioCIPolicy()
    assert get_policy("drift", max_drift_pct=None).max_drift_pct == 2.0
    assert get_policy("drift", max_drift_pct=3).params()["max_drift_pct"] == 3.0


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("t-test", {}, r"unknown policy 't-test'; valid policies: drift, ratio-ci"),
        ("drift", {"confidence": 0.9}, (r"unknown parameter\(s\) confidence .*valid parameters: "
                                        "max_drift_pct, min_effect_pct, tolerance_pct")),
        ("drift", {"max_drift_pct": 0.0}, "max_drift_pct"),
        ("drift", {"max_drift_pct": float("nan")}, "max_drift_pct"),
        ("drift", {"min_effect_pct": -0.1}, "min_effect_pct"),
        ("drift", {"tolerance_pct": "0.5"}, "tolerance_pct must be a number"),
        ("ratio-ci", {"confidence": 1.0}, "confidence"),
        ("ratio-ci", {"confidence": 0.5}, "confidence"),
        ("ratio-ci", {"mde_power": 1.0}, "mde_power"),
        ("ratio-ci", {"max_mde_pct": 0}, "max_mde_pct"),
        ("ratio-ci", {"max_history_gates": -1}, "max_history_gates"),
        ("ratio-ci", {"require_consistent_sign": 1}, "require_consistent_sign"),
        ("ratio-ci", {"max_drift_pct": 2.0}, "unknown parameter"),
    ],
)
def test_registry_errors(name, params, match) -> None:
    with pytest.raises(ValueError, match=match):
        get_policy(name, **params)


def test_judge_rejects_unregistered_policy_object() -> None:
    with pytest.raises(ValueError, match="unknown policy object"):
        judge(measurement_from_pattern("AXB", [1.0, 1.0, 1.0]), object())  # type: ignore[arg-type]


def test_control_history_validation() -> None:
    with pytest.raises(ValueError, match=r"pairs\[0\] must hold at least 2"):
        ControlHistory(pairs=((1.0,),))
    with pytest.raises(ValueError, match=r"pairs\[1\]"):
        ControlHistory(pairs=((1.0, 1.0), (1.0, -1.0)))
    assert ControlHistory(pairs=[[1.0, 2.0]]).pairs == ((1.0, 2.0),)
