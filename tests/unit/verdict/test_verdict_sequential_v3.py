"""sequential v3: the seeded mirrored design, outliers measured again, two run states, the
split guard, and the allocation's loop over next_roles (issue 23)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.verdict import (
    ControlHistory,
    GateMeasurement,
    RunSummary,
    get_policy,
    history_entry,
    judge,
    next_roles,
)
from orchestrator.verdict.design import label_controls, planned_codes, planned_roles

SEQ = get_policy("sequential")


def _seed_with_first_block(block: str) -> int:
    """The smallest seed whose plan's second block (runs 8-11) is ``block``."""
    for seed in range(1000):
        if "".join(planned_roles("mirror", seed, 14, 1)[8:12]).replace("A", "C").replace(
                "B", "C") == block:
            return seed
    raise AssertionError(block)


def _run_gate(seed: int, level, history: ControlHistory | None = None,
              policy=SEQ) -> tuple[GateMeasurement, list[tuple[str, ...]]]:
    """Drive a gate through next_roles like the allocation does; ``level(order, role)``
    gives each run's median. Returns the final measurement and every answer."""
    runs: list[RunSummary] = []
    answers = []
    roles = next_roles(None, policy)
    while roles:
        answers.append(roles)
        for role in roles:
            runs.append(RunSummary(role=role, order=len(runs),
                                   median_step_s=level(len(runs), role)))
        roles = next_roles(runs, policy, history=history, design_seed=seed)
    return GateMeasurement(runs=tuple(runs), design_seed=seed), answers


def test_planned_pattern_is_the_seeds_mirrored_blocks() -> None:
    for seed in (0, 1, 7, 123456):
        codes = planned_codes("mirror", seed, 14, 1)
        assert codes == planned_codes("mirror", seed, 14, 1)  # reproducible
        assert codes[:4] == (0, 0, 1, 0) and len(codes) == 14
        assert codes[4:8] == (0, 1, 1, 0)  # the first block: C X X C
        assert codes[8:12] in ((1, 0, 0, 1), (0, 1, 1, 0)), codes
        assert codes[12:] == (1, 0)  # the lone last pair ends on a control
    patterns = {"".join(planned_roles("mirror", s, 14, 1)) for s in range(40)}
    assert len(patterns) == 2  # the second block's 2 orientations
    long = {"".join(planned_roles("mirror", s, 30, 1)) for s in range(200)}
    assert len(long) == 2 ** 5  # 13 pairs: the first block fixed, 5 random, one lone
    assert "".join(planned_roles("alternate", 5, 14, 1)) == "AAXBXAXBXAXBXA"
    assert label_controls((0, 0, 1, 0, 0, 1, 1, 0)) == ("A", "A", "X", "B", "A", "X", "X", "B")


def test_mirrored_blocks_cancel_period_two_noise_that_aliases_on_alternation() -> None:
    # neighbouring runs anti-correlated: +-0.3% alternating, no true effect
    def level(order: int, role: str) -> float:
        return 1.0 + 0.003 * (-1) ** order

    seed = _seed_with_first_block("CXXC")
    alt = get_policy("sequential", design="alternate")
    m_alt, _ = _run_gate(seed, level, policy=alt)
    m_mir, _ = _run_gate(seed, level)
    ratio_alt = judge(m_alt, alt).statistics.ratio_pct
    v = judge(m_mir, SEQ)
    # alternation puts every X on an even position: the whole 0.6% swing reads as an effect
    assert ratio_alt == pytest.approx(0.6, abs=0.05)
    assert abs(v.statistics.ratio_pct) < 0.2 and v.verdict not in ("accept", "reject")
    assert v.sequential.design == "mirror" and v.sequential.design_seed == seed


def test_seeded_gate_must_follow_its_plan() -> None:
    seed = _seed_with_first_block("CXXC")
    assert planned_roles("mirror", seed, 14, 1)[4:6] == ("A", "X")
    runs = tuple(RunSummary(role=r, order=i, median_step_s=1.0 + 0.001 * i)
                 for i, r in enumerate("AAXBXA"))  # X A where the plan says A X
    with pytest.raises(ValueError, match=f"design seed {seed}"):
        judge(GateMeasurement(runs=runs, design_seed=seed), SEQ)
    # mid-pair: after the A of "A X" the next run is the X
    ok = [RunSummary(role=r, order=i, median_step_s=1.0) for i, r in enumerate("AAXBA")]
    assert next_roles(ok, SEQ, design_seed=seed) == ("X",)


def test_outlier_run_is_left_out_and_measured_again() -> None:
    seed = _seed_with_first_block("XCCX")
    rng = np.random.default_rng(4)
    noise = rng.normal(0.0, 0.0008, 40)

    def level(order: int, role: str) -> float:
        slow = 1.03 if order == 3 else 1.0  # the B of A X B: a run 3% slow
        return (0.99 if role == "X" else 1.0) * slow * math.exp(noise[order])

    m, answers = _run_gate(seed, level)
    v = judge(m, SEQ)
    d = v.to_dict()
    assert v.verdict == "accept", v.reason
    assert d["excluded_orders"] == [3] and "studentised residual" in d["excluded_reasons"][0]
    # the answer after the outlier's look is its role alone: measured again
    assert ("B",) in answers or ("A",) in answers
    assert d["num_runs_used"] == len(m.runs) == 9
    assert "outlier run(s) left out and measured again" in v.reason
    entry = history_entry(m, SEQ, excluded=tuple(d["excluded_orders"]))
    assert all(abs(x - 1.0) < 0.01 for x in entry)  # the 3% run is no history
    # v2 settings on the same gate: the outlier inflates sigma and nothing is decided at 8
    v2 = get_policy("sequential", max_replacements=0, design="mirror")
    assert judge(GateMeasurement(runs=m.runs[:8], design_seed=seed), v2).verdict \
        == "inconclusive"


def test_split_guard_holds_back_a_split_the_conditioning_run_contradicts() -> None:
    # two run states 1% apart: every X happened to land in the slow state, every used
    # control in the fast one, but the conditioning control was slow too: the split
    # "candidate slower" could be the states lining up by chance
    seed = _seed_with_first_block("XCCX")
    plan = planned_roles("mirror", seed, 14, 1)
    slow = {0} | {i for i, r in enumerate(plan[:8]) if r == "X"}
    rng = np.random.default_rng(9)
    meds = [(1.01 if i in slow else 1.0) * math.exp(rng.normal(0, 0.0005)) for i in range(8)]
    m = GateMeasurement(runs=tuple(RunSummary(role=r, order=i, median_step_s=meds[i])
                                   for i, r in enumerate(plan[:8])), design_seed=seed)
    v = judge(m, SEQ)
    assert v.verdict == "inconclusive" and v.sequential.split_guard_held, v.reason
    assert "two run states" in v.reason
    # the same medians with a fast conditioning run: a clean split of 3 X / 5 controls
    # (p 0.50% <= split_alpha 0.55%) decides
    meds[0] = 1.0
    m2 = GateMeasurement(runs=tuple(RunSummary(role=r, order=i, median_step_s=meds[i])
                                    for i, r in enumerate(plan[:8])), design_seed=seed)
    assert judge(m2, SEQ).verdict == "reject"


def test_two_run_states_enter_the_fit_as_a_covariate() -> None:
    # no effect; runs in two states 2% apart, both roles in both states
    seed = _seed_with_first_block("XCCX")
    plan = planned_roles("mirror", seed, 14, 1)
    states = [0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0]
    rng = np.random.default_rng(2)
    meds = [(1.02 if s else 1.0) * math.exp(rng.normal(0, 0.0005)) for s in states]
    m = GateMeasurement(runs=tuple(RunSummary(role=r, order=i, median_step_s=meds[i])
                                   for i, r in enumerate(plan)), design_seed=seed)
    v = judge(m, SEQ)
    assert v.sequential.two_state_fit and "two states" in v.reason
    assert v.verdict == "neutral" and abs(v.statistics.ratio_pct) < 0.1, v.reason
    assert v.statistics.run_sigma_pct < 0.2
    off = judge(m, get_policy("sequential", state_separation=1e9))
    assert off.statistics.run_sigma_pct > 0.5  # without the state the 2% gap is noise
    assert off.verdict == "inconclusive"


def test_allocation_loop_and_stored_verdict_agree() -> None:
    rng = np.random.default_rng(11)
    for trial in range(30):
        seed = int(rng.integers(0, 2**31))
        eff = [0.99, 1.0, 1.004][trial % 3]
        noise = rng.normal(0, 0.002, 20)
        bad = int(rng.integers(1, 10)) if trial % 4 == 0 else -1

        def level(order, role, eff=eff, noise=noise, bad=bad):
            return (eff if role == "X" else 1.0) * (1.03 if order == bad else 1.0) \
                * math.exp(noise[order])

        m, answers = _run_gate(seed, level)
        v = judge(m, SEQ)
        assert v.sequential.sequential_state in ("decided", "exhausted")
        assert v.sequential.num_runs_used == len(m.runs)
        assert next_roles(m, SEQ) == ()
        assert sum(len(a) for a in answers) == len(m.runs)



@pytest.mark.parametrize("family,sigma,effect", [
    ("normal", 0.0025, 0.0), ("outlier", 0.0015, -0.01), ("bimodal", 0.001, 0.0),
    ("anticorrelated", 0.0025, -0.01), ("hiccups", 0.0015, 0.0), ("h200", 0.0, -0.01),
])
def test_noise_suite_walk_equals_one_gate_judge(family, sigma, effect) -> None:
    """benchmarks/verdict_noise.py counts verdicts with the vectorised ``seqcore.walk``; its
    table is only the default policy's if every gate it simulates gets the same verdict
    from ``judge()`` one at a time (stored run order, design seed, outlier replacements)."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks"))
    import verdict_noise as vn

    policy = get_policy("sequential")
    h200 = vn.load_h200_gates() if family == "h200" else None
    out = vn.sequential_cell(policy, family, sigma, effect, 60, 20261202, "none", h200)
    assert vn.check_engine(policy, out, effect, 60) == 0
    assert out["runs"].min() >= 8 or family != "normal"
    if effect:
        assert (out["code"] == vn.ACCEPT).sum() >= 30  # a 1% speedup is mostly accepted
