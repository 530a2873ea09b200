"""sequential policy: looks, boundary, calibration, conditioning run, next_roles (v3: the
randomised design, outliers measured again, two run states, the split guard, the early look).

Gates built from a pattern string carry no design seed: they are judged as given."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from orchestrator.verdict import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    build_run_summary,
    get_policy,
    history_entry,
    initial_roles,
    judge,
    measurement_from_pattern,
    next_roles,
    run_statistics,
)
from orchestrator.verdict.boundaries import spent_alpha, z_boundaries, z_boundaries_spending
from orchestrator.verdict.calibration import effective_history_dof
from orchestrator.verdict.design import planned_roles

SEQ = get_policy("sequential")
# 20 earlier (A, B) pairs whose log spread is 0.2%: sigma about 0.2%.
QUIET = ControlHistory(pairs=[(1.0, 1.002 ** math.sqrt(2)), (1.0, 1.002 ** -math.sqrt(2))] * 10)


def _gate(pattern: str, medians: list[float], **fields) -> GateMeasurement:
    return measurement_from_pattern(pattern, medians, **fields)


def test_initial_roles_and_next_roles_before_any_run() -> None:
    assert initial_roles(SEQ) == ("A", "A", "X", "B")
    assert next_roles(None, SEQ) == ("A", "A", "X", "B")
    assert next_roles(None, get_policy("drift")) == ()
    assert next_roles(None, get_policy("sequential", num_conditioning_runs=0)) == ("A", "X", "B")


# cond A, then A X B X A X B: X 1% faster, controls about 0.15% apart
LOOK3 = [0.996, 1.0, 0.99, 1.002, 0.989, 0.9985, 0.9905, 1.001]
# looks of the plan of a given A A X B X A X B (extended by X + control pairs to 14 runs,
# QUIET history): look 2 (own dof 2) is the early look, spending 20% of alpha; looks 3-6
# (own dof 4, 6, 8, 10 + history dof 1, 1, 2, 2 >= min_dof 3) spend the rest, linearly in the
# information fraction v_final / v_look (spending_gamma 0)
V_FINAL = 1 / 6 + 1 / 7


def _fit(medians: list[float], roles: str) -> tuple[np.ndarray, float, int]:
    """Least squares with numpy: intercept, candidate, trend (from 5 used runs)."""
    used = np.log(np.array(medians))
    n = len(roles)
    cols = [np.ones(n), [r == "X" for r in roles]] + ([np.arange(n) - (n - 1) / 2]
                                                      if n >= 5 else [])
    design = np.column_stack(cols)
    coef, res, _, _ = np.linalg.lstsq(design, used, rcond=None)
    inv = np.linalg.inv(design.T @ design)
    return coef, float(res[0]), n - design.shape[1], float(inv[1, 1])


def test_decided_at_look_three_matches_hand_computation() -> None:
    # without history: looks 3-6 spend alpha linearly in the information fraction
    coef, ss, dof, v = _fit(LOOK3[1:], "AXBXAXB")
    assert dof == 4 and v == pytest.approx(1 / 3 + 1 / 4)
    sigma = math.sqrt(ss / dof)
    fractions = [V_FINAL / (1 / nx + 1 / (nx + 1)) for nx in (3, 4, 5)] + [1.0]
    z3 = z_boundaries(tuple(fractions), SEQ.alpha, SEQ.spending_gamma)[0]
    assert z3 == pytest.approx(stats.norm.isf(SEQ.alpha * fractions[0]), rel=1e-9)
    c = stats.t.isf(stats.norm.sf(z3), dof)
    low, high = coef[1] - c * sigma * math.sqrt(v), coef[1] + c * sigma * math.sqrt(v)
    assert high < 0.0
    assert z3 == pytest.approx(2.8594, abs=1e-3) and c == pytest.approx(5.8554, abs=1e-3)
    v3 = judge(_gate("AAXBXAXB", LOOK3), SEQ)
    d = v3.to_dict()
    assert v3.verdict == "accept", v3.reason
    assert d["sequential_state"] == "decided" and d["num_looks"] == 3 and d["next_roles"] == []
    assert d["ci_low_pct"] == pytest.approx(math.expm1(low) * 100, rel=1e-9)
    assert d["ci_high_pct"] == pytest.approx(math.expm1(high) * 100, rel=1e-9)
    assert d["run_sigma_pct"] == pytest.approx(sigma * 100, rel=1e-9)
    assert d["z_boundary"] == pytest.approx(z3, rel=1e-9)
    assert d["critical_value"] == pytest.approx(c, rel=1e-9)
    assert d["dof"] == 4 and d["num_gate_control_pairs"] == 4 and d["num_history_pairs"] == 0
    assert d["num_conditioning_runs"] == 1 and d["design_seed"] is None
    assert d["first_run_offset_pct"] == pytest.approx(-0.4)
    assert d["num_runs_used"] == 8 and d["max_runs"] == 14 and d["num_runs_planned"] == 14
    assert not d["early_look"] and d["excluded_orders"] == []
    assert next_roles(_gate("AAXBXAXB", LOOK3), SEQ) == ()


def test_consistent_history_decides_at_the_early_look() -> None:
    # with the QUIET history the early look (A X B X A, own dof 2) adds early_history_dof
    # history dof and spends early_alpha_fraction of alpha: the 1% speedup is accepted
    # after 6 runs instead of 8
    coef, ss, dof, v = _fit(LOOK3[1:6], "AXBXA")
    assert dof == 2 and v == pytest.approx(1 / 2 + 1 / 3)
    hist_ss, hist_dof = sum(math.log(b / a) ** 2 / 2 for a, b in QUIET.pairs), 20
    h = SEQ.early_history_dof
    sigma = math.sqrt((ss + hist_ss * h / hist_dof) / (dof + h))
    z2 = stats.norm.isf(SEQ.alpha * SEQ.early_alpha_fraction)
    c = stats.t.isf(stats.norm.sf(z2), dof + h)
    high = coef[1] + c * sigma * math.sqrt(v)
    v2 = judge(_gate("AAXBXAXB", LOOK3), SEQ, history=QUIET)
    d = v2.to_dict()
    assert v2.verdict == "accept" and d["num_looks"] == 2 and d["num_runs_used"] == 6
    assert d["early_look"] and d["dof"] == dof + h and d["num_history_pairs"] == h
    assert d["z_boundary"] == pytest.approx(z2, rel=1e-9)
    assert d["ci_high_pct"] == pytest.approx(math.expm1(high) * 100, rel=1e-9)
    assert d["history_check"] == "consistent" and d["num_history_gates"] == 20
    # a history twice as noisy as the gate is dropped by the F check: no early decision
    noisy = ControlHistory(pairs=[(1.0, 1.05), (1.05, 1.0)] * 10)
    assert judge(_gate("AAXBXA", LOOK3[:6]), SEQ, history=noisy).verdict == "inconclusive"


def test_look_one_never_decides_even_with_a_matching_history() -> None:
    # X 3% faster at A X B: v1 accepted here on the history's 20 dof; v2 gives a history
    # at most floor(0.25 x own dof) dof, so look 1 (1 own dof) spends no error
    gate = _gate("AAXB", [0.996, 1.0, 0.97, 1.001])
    v = judge(gate, SEQ, history=QUIET)
    d = v.to_dict()
    assert v.verdict == "inconclusive" and "extend with X A" in v.reason
    assert d["history_check"] == "consistent" and d["num_history_pairs"] == 0
    assert d["dof"] == 1 and d["z_boundary"] is None
    assert next_roles(gate, SEQ, history=QUIET) == ("X", "A")


@pytest.mark.parametrize(("own", "hist", "weight", "expected"),
                         [(1, 20, 0.25, 0), (3, 20, 0.25, 0), (4, 20, 0.25, 1), (8, 20, 0.25, 2),
                          (200, 20, 0.25, 20), (4, 20, 1e9, 20), (0, 20, 1e9, 0), (4, 0, 1.0, 0)])
def test_effective_history_dof(own, hist, weight, expected) -> None:
    assert effective_history_dof(own, hist, weight) == expected


def test_undecided_look_one_extends_with_x_then_the_other_control() -> None:
    medians = [0.996, 1.0, 0.996, 1.001]  # X 0.45% faster
    gate = _gate("AAXB", medians)
    v = judge(gate, SEQ, history=QUIET)
    assert v.verdict == "inconclusive" and "extend with X A" in v.reason
    assert v.sequential.sequential_state == "extend"
    assert next_roles(gate, SEQ, history=QUIET) == v.sequential.next_roles == ("X", "A")
    longer = _gate("AAXBXA", medians + [0.995, 0.999])
    assert next_roles(longer, SEQ, history=QUIET) == ("X", "B")


def test_boundaries_spend_alpha_by_monte_carlo() -> None:
    fractions = (0.25, 0.45, 0.63, 0.82, 1.0)
    bounds = np.array(z_boundaries(fractions, 0.007, 1.0))
    assert z_boundaries((1.0,), 0.007, 1.0)[0] == pytest.approx(stats.norm.isf(0.007))
    rng = np.random.default_rng(3)
    t = np.array(fractions)
    paths = np.cumsum(rng.normal(size=(400_000, 5)) * np.sqrt(np.diff(np.r_[0.0, t])), axis=1)
    z = paths / np.sqrt(t)
    up, down = z >= bounds, z <= -bounds
    crossed = up | down
    first = np.argmax(crossed, axis=1)
    any_cross = crossed.any(axis=1)
    upper = any_cross & up[np.arange(len(z)), first]
    assert upper.mean() == pytest.approx(0.007, abs=0.0006)


def test_budget_exhausted_ends_neutral_or_inconclusive() -> None:
    quiet = [1.0, 1.0, 1.0004, 0.9996, 1.0003, 1.0, 0.9998, 1.0001, 1.0, 0.9999, 1.0002, 1.0,
             1.0001, 0.9999]
    gate = _gate("AAXBXAXBXAXBXA", quiet)
    v = judge(gate, get_policy("sequential", neutral_band_pct=0.0))
    assert v.verdict == "neutral" and v.sequential.sequential_state == "exhausted"
    assert v.sequential.num_looks == 6 and next_roles(gate, SEQ) == ()
    assert "budget of 14 runs used" in v.reason
    noisy = [1.0, 1.0, 1.03, 0.97, 1.02, 1.04, 0.98, 0.96, 1.01, 1.03, 0.99, 0.97, 1.02, 0.98]
    v = judge(_gate("AAXBXAXBXAXBXA", noisy), SEQ)
    assert v.verdict == "inconclusive" and "budget of 14 runs used" in v.reason
    # a 12-run gate is not done yet: the budget allows one more X + control
    assert next_roles(_gate("AAXBXAXBXAXB", noisy[:12]), SEQ) == ("X", "A")


def test_conditioning_run_is_left_out_of_the_estimate() -> None:
    base = [1.0, 0.999, 1.001]
    a = judge(_gate("AAXB", [1.0] + base), SEQ, history=QUIET).to_dict()
    b = judge(_gate("AAXB", [0.9] + base), SEQ, history=QUIET).to_dict()
    for key in ("ratio_pct", "ci_low_pct", "ci_high_pct", "run_sigma_pct", "verdict"):
        assert a[key] == b[key], key
    assert b["first_run_offset_pct"] == pytest.approx(-10.0)
    # A X B has no control to spare: nothing is left out
    assert judge(_gate("AXB", base), SEQ).sequential.num_conditioning_runs == 0


def test_identical_control_medians_do_not_give_zero_sigma() -> None:
    v = judge(_gate("AAXB", [1.0, 1.0, 1.001, 1.0]), SEQ, history=None)
    assert v.statistics.run_sigma_pct == pytest.approx(SEQ.min_sigma_pct)
    assert v.statistics.calibration == "floor" and v.verdict != "reject"
    # the bimodal case: both controls on the fast mode, X on the slow one; each
    # run's own steps say its median can move by ~half the 12% gap
    runs = tuple(RunSummary(role=r, order=i, median_step_s=m, median_se_s=0.05)
                 for i, (r, m) in enumerate(zip("AAXB", (1.0, 1.0, 1.12, 1.0))))
    v = judge(GateMeasurement(runs=runs), SEQ, history=QUIET)
    assert v.statistics.run_sigma_pct >= 4.8 and v.verdict not in {"accept", "reject"}


def test_history_whose_spread_disagrees_is_dropped_and_reported() -> None:
    # gate controls 3% apart vs a history at 0.2%: F = 225 >> F(0.5; 1, 20)
    v = judge(_gate("AAXB", [1.0, 1.0, 0.97, 1.03]), SEQ, history=QUIET)
    d = v.to_dict()
    assert d["history_check"] == "dropped"
    assert d["num_history_gates_dropped"] == 20 and d["num_history_pairs_dropped"] == 20
    assert d["num_history_gates"] == 0 and d["dof"] == 1
    assert d["history_check_f"] > d["history_check_critical"]
    assert d["history_check_critical"] == pytest.approx(stats.f.isf(0.5, 1, 20), rel=1e-9)
    assert "history dropped" in d["reason"]
    ok = judge(_gate("AAXBXAXB", LOOK3), SEQ, history=QUIET).to_dict()
    assert ok["history_check"] == "consistent" and ok["num_history_gates"] == 20


def test_history_noisier_than_the_gate_is_dropped_too() -> None:
    # gate residuals ~0.15%, history pairs 5% apart: F = 0.0007 < F(0.05; 4, 20) = 0.17
    noisy = ControlHistory(pairs=[(1.0, 1.05), (1.05, 1.0)] * 10)
    d = judge(_gate("AAXBXAXB", LOOK3), SEQ, history=noisy).to_dict()
    assert d["history_check"] == "dropped" and d["dof"] == 4 and d["num_history_pairs"] == 0
    assert d["history_check_f"] < d["history_check_critical"]
    assert d["history_check_critical"] == pytest.approx(stats.f.ppf(0.05, 4, 20), rel=1e-9)
    assert "noisier than the gate" in d["reason"]


@pytest.mark.parametrize("available", [30, 50, 70])
def test_history_uses_min_of_limit_and_available(available) -> None:
    history = ControlHistory(pairs=QUIET.pairs[:1] * available,
                             gate_ids=[str(i) for i in range(available)])
    d = judge(_gate("AAXBXAXB", LOOK3), SEQ, history=history).to_dict()
    assert d["history_check"] == "consistent"
    assert d["num_history_gates"] == min(50, available)
    assert d["num_history_gates_available"] == available
    assert d["history_gate_ids_used"] == [str(i) for i in range(available)][-min(50, available):]


def _bimodal_summary(rng: np.random.Generator, role: str, order: int) -> RunSummary:
    steps = np.where(rng.random(30) < 0.5, 1.0, 1.12) * np.exp(rng.normal(0, 0.002, 30))
    return build_run_summary(role, order, run_statistics(steps.tolist(), num_warmup_steps=10))


@pytest.mark.parametrize("with_history", [False, True])
def test_bimodal_steps_make_no_false_decision(with_history) -> None:
    rng = np.random.default_rng(12)
    history = ControlHistory(pairs=[(1.0, 1.12), (1.06, 1.0), (1.12, 1.12)] * 7) \
        if with_history else None
    decisions = []
    for _ in range(60):
        runs: list[RunSummary] = []
        roles = next_roles(None, SEQ, history=history)
        while roles:
            runs += [_bimodal_summary(rng, r, len(runs) + i) for i, r in enumerate(roles)]
            roles = next_roles(GateMeasurement(runs=tuple(runs)), SEQ, history=history)
        v = judge(GateMeasurement(runs=tuple(runs)), SEQ, history=history)
        assert v.sequential.num_multimodal_runs >= 1 and "multimodal" in v.reason
        decisions.append(v.verdict)
    assert not {"accept", "reject"} & set(decisions), decisions


def test_regate_kind_and_json_safety() -> None:
    slower = [0.996, 1.0, 1.02, 1.002, 1.021, 0.9985, 1.0195, 1.001]  # X 2% slower
    v = judge(_gate("AAXBXAXB", slower, kind="regate"), SEQ, history=QUIET)
    assert v.verdict == "regression" and v.sequential.num_looks == 3, v.reason
    for medians in ([1.0, 1.0, 50.0, 0.02], [1.0, 1.0, 1.0, 1.0]):
        d = judge(_gate("AAXB", medians), SEQ).to_dict()
        json.dumps(d, allow_nan=False)


def test_history_entry_leaves_out_the_conditioning_run() -> None:
    gate = _gate("AAXBXA", [0.99, 1.0, 0.98, 1.01, 0.97, 1.02])
    assert history_entry(gate, SEQ) == (1.0, 1.01, 1.02)
    assert history_entry(_gate("AXB", [1.0, 0.9, 1.1]), SEQ) == (1.0, 1.1)


def test_failed_run_stops_the_gate() -> None:
    runs = (RunSummary(role="A", order=0, median_step_s=1.0),
            RunSummary(role="A", order=1, median_step_s=1.0),
            RunSummary(role="X", order=2, median_step_s=float("nan"), failed=True),
            RunSummary(role="B", order=3, median_step_s=1.0))
    assert next_roles(GateMeasurement(runs=runs), SEQ) == ()
    assert judge(GateMeasurement(runs=runs), SEQ).verdict == "failed"


@pytest.mark.parametrize(
    ("params", "match"),
    [({"max_runs": 3}, "max_runs"), ({"alpha": 0.0}, "alpha"), ({"min_dof": 0}, "min_dof"),
     ({"num_conditioning_runs": -1}, "num_conditioning_runs"), ({"nope": 1}, "nope")],
)
def test_bad_parameters_name_the_field(params, match) -> None:
    with pytest.raises(ValueError, match=match):
        get_policy("sequential", **params)


def test_next_roles_after_each_run_completes_the_look_then_asks_judge() -> None:
    meds = [0.996, 1.0, 0.996, 1.001, 0.995, 0.999]
    runs = [RunSummary(role=r, order=i, median_step_s=m) for i, (r, m) in
            enumerate(zip("AAXBXA", meds))]
    assert next_roles([], SEQ) == ("A", "A", "X", "B")
    assert next_roles(runs[:1], SEQ) == ("A", "X", "B")
    assert next_roles(runs[:3], SEQ) == ("B",)
    at_look = next_roles(runs[:4], SEQ, history=QUIET)
    assert at_look == next_roles(GateMeasurement(runs=tuple(runs[:4])), SEQ, history=QUIET)
    assert at_look == ("X", "A")
    assert next_roles(runs[:5], SEQ) == ("A",)
    with pytest.raises(ValueError, match="do not start the pattern"):
        next_roles(runs[2:3], SEQ)
