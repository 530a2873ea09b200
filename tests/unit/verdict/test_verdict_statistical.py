"""ratio-ci policy: interval, calibration, MDE and every verdict branch."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from orchestrator.verdict import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    get_policy,
    judge,
    measurement_from_pattern,
)

QUIET_HISTORY = ControlHistory(pairs=[(1.0, 1.001), (1.0, 0.999)] * 15)


def _judge(pattern, medians, history=None, kind="candidate", **params):
    m = measurement_from_pattern(pattern, medians, kind=kind)
    return judge(m, get_policy("ratio-ci", **params), history=history)


def test_interval_matches_hand_computation() -> None:
    a, x, b = 1.0, 0.99, 1.002
    history = ControlHistory(pairs=[(2.0, 2.004), (3.0, 2.997)])
    v = _judge("AXB", [a, x, b], history)
    ss = (math.log(a) - math.log(b)) ** 2 / 2 + (math.log(2.0 / 2.004)) ** 2 / 2 \
        + (math.log(3.0 / 2.997)) ** 2 / 2
    dof = 3
    sigma = math.sqrt(ss / dof)
    se = sigma * math.sqrt(1.5)
    d = math.log(x) - (math.log(a) + math.log(b)) / 2
    tq = stats.t.ppf(0.99, dof)
    s = v.statistics
    assert s is not None
    assert s.dof == 3 and s.num_gate_control_pairs == 1 and s.num_history_pairs == 2
    assert s.num_history_gates == 2 and s.calibration == "gate+history"
    assert s.run_sigma_pct == pytest.approx(sigma * 100)
    assert s.ratio_pct == pytest.approx(math.expm1(d) * 100)
    assert s.ci_low_pct == pytest.approx(math.expm1(d - tq * se) * 100)
    assert s.ci_high_pct == pytest.approx(math.expm1(d + tq * se) * 100)
    t_pow = stats.t.ppf(0.95, dof)
    assert s.mde_pct == pytest.approx(-math.expm1(-(tq + t_pow) * se) * 100)


def test_axbxa_variance_factor_and_gate_dof() -> None:
    v = _judge("AXBXA", [1.0, 0.99, 1.002, 0.991, 1.001])
    s = v.statistics
    assert s.dof == 2 and s.num_gate_control_pairs == 2 and s.calibration == "gate"
    logs = [math.log(c) for c in (1.0, 1.002, 1.001)]
    mean = sum(logs) / 3
    sigma = math.sqrt(sum((v - mean) ** 2 for v in logs) / 2)
    se = sigma * math.sqrt(0.875)  # 2 x (1/2)^2 + (1/4)^2 + (1/2)^2 + (1/4)^2
    tq = stats.t.ppf(0.99, 2)
    d = (math.log(0.99) + math.log(0.991)) / 2 - (
        math.log(1.0) + 2 * math.log(1.002) + math.log(1.001)) / 4
    assert s.ci_high_pct == pytest.approx(math.expm1(d + tq * se) * 100)


def test_accept_with_calibrated_history() -> None:
    v = _judge("AXB", [1.0, 0.99, 1.0005], QUIET_HISTORY)
    assert v.verdict == "accept", v.reason
    assert v.statistics.ci_high_pct < 0


def test_reject_with_calibrated_history() -> None:
    v = _judge("AXB", [1.0, 1.01, 1.0005], QUIET_HISTORY)
    assert v.verdict == "reject", v.reason
    assert v.statistics.ci_low_pct > 0


def test_neutral_when_interval_straddles_zero_and_mde_small() -> None:
    v = _judge("AXB", [1.0, 1.0003, 1.0005], QUIET_HISTORY)
    assert v.verdict == "neutral", v.reason
    assert v.statistics.mde_pct <= 2.0


def test_single_axb_without_history_is_inconclusive() -> None:
    # The drift rule accepts this (delta -2% vs drift 0.5%); one control pair
    # (1 dof) cannot calibrate run-to-run noise.
    medians = [1.0, 0.98, 1.005]
    assert judge(measurement_from_pattern("AXB", medians), get_policy("drift")).verdict == "accept"
    v = _judge("AXB", medians)
    assert v.verdict == "inconclusive", v.reason
    assert v.statistics.calibration == "gate" and v.statistics.dof == 1
    assert v.statistics.mde_pct > 2.0


def test_min_effect_requires_interval_beyond_it() -> None:
    medians = [1.0, 0.99, 1.0005]
    assert _judge("AXB", medians, QUIET_HISTORY).verdict == "accept"
    v = _judge("AXB", medians, QUIET_HISTORY, min_effect_pct=1.0)
    assert v.verdict == "neutral" and v.threshold_pct == 1.0


def test_sign_conflict_rule_is_a_parameter() -> None:
    medians = [1.0, 0.98, 1.0, 1.001, 1.0]
    v = _judge("AXBXA", medians, QUIET_HISTORY)
    assert v.sign_conflict and v.verdict == "neutral"
    v = _judge("AXBXA", medians, QUIET_HISTORY, require_consistent_sign=False)
    assert v.verdict in {"accept", "neutral"} and "disagree" not in v.reason


def test_noisier_history_widens_interval() -> None:
    noisy = ControlHistory(pairs=[(1.0, 1.01), (1.0, 0.99)] * 15)
    quiet = _judge("AXB", [1.0, 0.99, 1.0005], QUIET_HISTORY).statistics
    loud = _judge("AXB", [1.0, 0.99, 1.0005], noisy).statistics
    assert loud.ci_high_pct - loud.ci_low_pct > 5 * (quiet.ci_high_pct - quiet.ci_low_pct)
    assert loud.mde_pct > quiet.mde_pct


def test_max_history_gates_uses_most_recent() -> None:
    history = ControlHistory(pairs=[(1.0, 1.5)] * 5 + [(1.0, 1.001)] * 10)
    s = _judge("AXB", [1.0, 0.99, 1.0005], history, max_history_gates=10).statistics
    assert s.num_history_gates == 10 and s.run_sigma_pct < 0.2
    s = _judge("AXB", [1.0, 0.99, 1.0005], history, max_history_gates=0).statistics
    # controls 0.05% apart: s = 0.035% is below the min_sigma_pct floor of 0.05%
    assert s.num_history_gates == 0 and s.calibration == "floor"


def test_history_entries_may_hold_more_than_two_controls() -> None:
    history = ControlHistory(pairs=[(1.0, 1.001, 0.999)] * 4)
    s = _judge("AXB", [1.0, 0.99, 1.0005], history).statistics
    assert s.num_history_pairs == 8 and s.num_history_gates == 4 and s.dof == 9


@pytest.mark.parametrize(
    ("medians", "params", "expected"),
    [
        ([1.0, 1.01, 1.0005], {}, "regression"),
        ([1.0, 0.99, 1.0005], {}, "improvement"),
        ([1.0, 1.0003, 1.0005], {}, "pass"),
        ([1.0, 1.004, 1.0], {}, "pass"),  # significant but within tolerance 0.5%
        ([1.0, 1.004, 1.0], {"tolerance_pct": 0.2}, "regression"),
        ([1.0, 1.01, 1.02], {}, "pass"),  # not significant: noisy gate vs quiet history
    ],
)
def test_regate_branches(medians, params, expected) -> None:
    v = _judge("AXB", medians, QUIET_HISTORY, kind="regate", **params)
    assert v.verdict == expected, v.reason


def test_regate_sign_conflict_is_pass() -> None:
    v = _judge("AXBXA", [1.0, 0.98, 1.0, 1.001, 1.0], QUIET_HISTORY, kind="regate")
    assert v.verdict == "pass" and "disagree" in v.reason


def test_regate_mde_covers_tolerance() -> None:
    s = _judge("AXB", [1.0, 1.0, 1.0], QUIET_HISTORY, kind="regate").statistics
    assert s.mde_pct > 0.5


def test_to_dict_is_json_safe_and_complete() -> None:
    d = _judge("AXBXA", [1.0, 0.99, 1.002, 0.991, 1.001], QUIET_HISTORY).to_dict()
    json.dumps(d, allow_nan=False)
    for key in ("ci_low_pct", "ci_high_pct", "mde_pct", "ratio_pct", "dof", "confidence",
                "num_gate_control_pairs", "num_history_pairs", "calibration", "policy_version",
                "params", "midpoint_s", "drift_pct", "delta_ms", "delta_pct", "threshold_pct"):
        assert key in d, key
    assert d["policy"] == "ratio-ci" and d["params"]["confidence"] == 0.98


def test_identical_controls_do_not_mean_zero_noise() -> None:
    # Issue 12: `--policy ratio-ci --a 0.1 --x 0.1001 --b 0.1` said reject [+0.100%, +0.100%].
    v = _judge("AXB", [0.1, 0.1001, 0.1])
    s = v.statistics
    assert s.run_sigma_pct == pytest.approx(0.05) and s.calibration == "floor"
    assert s.ci_low_pct < 0.0 < s.ci_high_pct
    assert v.verdict == "inconclusive", v.reason
    json.dumps(v.to_dict(), allow_nan=False)


def test_identical_controls_use_the_runs_median_errors_as_floor() -> None:
    runs = tuple(RunSummary(role=r, order=i, median_step_s=m, median_se_s=se)
                 for i, (r, m, se) in enumerate(zip("AXB", (1.0, 1.12, 1.0), (0.05, 0.05, 0.05))))
    v = judge(GateMeasurement(runs=runs), get_policy("ratio-ci"), history=QUIET_HISTORY)
    floor = 100 * math.sqrt((2 * 0.05**2 + (0.05 / 1.12) ** 2) / 3)
    assert v.statistics.sigma_floor_pct == pytest.approx(floor, rel=1e-9)
    assert v.statistics.run_sigma_pct >= floor
    assert v.verdict != "reject", v.reason


@pytest.mark.parametrize("available", [20, 30, 49, 50, 80])
def test_history_uses_min_of_limit_and_available(available) -> None:
    # Issue 12: with 26-49 entries, v1 used only 50 - available of them (negative slice).
    history = ControlHistory(pairs=[(1.0, 1.001 + i * 1e-5) for i in range(available)],
                             gate_ids=[f"g{i}" for i in range(available)])
    s = _judge("AXB", [1.0, 0.99, 1.0005], history).statistics
    assert s.num_history_gates == min(50, available)
    assert s.num_history_pairs == min(50, available)
    assert s.num_history_gates_available == available


def test_absurd_interval_is_not_enough_control_pairs() -> None:
    # Issue 12: `--a 0.5000 --x 0.5650 --b 0.4950` printed [-13.9%, +49.8%] (MDE ~28%).
    v = _judge("AXB", [0.5, 0.565, 0.495])
    assert v.verdict == "inconclusive" and not v.statistics.not_enough_control_pairs
    v = _judge("AXB", [1.0, 1.1, 0.9])  # MDE as a ratio > 100%
    assert v.statistics.not_enough_control_pairs
    assert v.verdict == "inconclusive" and "not enough control pairs" in v.reason
    quiet = _judge("AXB", [1.0, 0.99, 1.0005], QUIET_HISTORY).statistics
    assert not quiet.not_enough_control_pairs
