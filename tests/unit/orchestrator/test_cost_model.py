"""The cost model's window (issue 23): GPU-seconds per decision from measured inputs."""

from __future__ import annotations

import math

import pytest

from orchestrator.domain.cost_model import (
    DEFAULT_BETWEEN_SIGMA,
    MIN_STEPS,
    choose_window,
    runs_per_decision,
)
from orchestrator.executors.driver.window import (
    CALIBRATION_STEPS,
    calibration_plan,
    choose_after_calibration,
    learned_warmup_steps,
)
from orchestrator.executors.plan import GatePlan


def test_runs_per_decision_follows_the_simulated_table() -> None:
    # quiet runs: the third look (8 runs) decides; noisy runs need the whole budget and
    # decide rarely, so each decision costs many more runs
    assert runs_per_decision(0.0005) == pytest.approx(8.0, abs=0.05)
    assert runs_per_decision(0.0025) == pytest.approx(9.8, abs=0.3)
    assert runs_per_decision(0.01) > 50
    assert runs_per_decision(0.0002) == runs_per_decision(0.0003)  # clamped at the table's end
    with pytest.raises(ValueError, match="sigma"):
        runs_per_decision(0.0)


def test_h200_profile_chooses_the_shortest_robust_window() -> None:
    # 1xH200 (gate_cost_h200x1_2026-12-01): 0.859 s steps of 0.2% sd, fixed cost + warmup
    # 10.3 s; a 10-step calibration median carries 1.2533 x 0.2% / sqrt(10) of error
    se = 1.2533 * 0.002 / math.sqrt(10)
    c = choose_window(fixed_s=10.3, step_s=0.859, median_se_rel=se, num_steps=10)
    assert c.measured_steps == MIN_STEPS and c.between_source == "default"
    assert c.between_sigma == DEFAULT_BETWEEN_SIGMA
    assert c.run_sigma == pytest.approx(math.sqrt(0.0005**2 + (se * math.sqrt(10)) ** 2 / 5))
    assert c.runs_per_decision == pytest.approx(8.0, abs=0.1)
    assert c.expected_gpu_s == pytest.approx((10.3 + 5 * 0.859) * c.runs_per_decision)
    two = choose_window(fixed_s=10.3, step_s=0.859, median_se_rel=se, num_steps=10, num_gpus=2)
    assert two.expected_gpu_s == pytest.approx(2 * c.expected_gpu_s)


def test_noisy_steps_buy_a_longer_window_up_to_the_cap() -> None:
    # 3% per-step noise: 5 steps give a 1.7% run sigma (hopeless); longer windows pay off
    se = 1.2533 * 0.03 / math.sqrt(10)
    c = choose_window(fixed_s=5.0, step_s=0.1, median_se_rel=se, num_steps=10)
    assert 40 < c.measured_steps and c.measured_steps * 0.1 <= 60.0
    capped = choose_window(fixed_s=5.0, step_s=0.1, median_se_rel=se, num_steps=10,
                           max_window_s=3.0)
    assert capped.measured_steps == 30


def test_history_sets_the_between_run_part() -> None:
    se = 0.0008
    quiet = choose_window(fixed_s=4.0, step_s=0.5, median_se_rel=se, num_steps=10,
                          history_sigma=0.0008)
    assert quiet.between_source == "history"
    assert quiet.between_sigma == pytest.approx(0.5 * DEFAULT_BETWEEN_SIGMA)  # floored
    noisy = choose_window(fixed_s=4.0, step_s=0.5, median_se_rel=se, num_steps=10,
                          history_sigma=0.004)
    assert noisy.between_sigma == pytest.approx(math.sqrt(0.004**2 - se**2))


@pytest.mark.parametrize("kwargs, match", [
    ({"step_s": 0.0}, "step_s"), ({"num_steps": 0}, "num_steps"), ({"fixed_s": -1.0}, "fixed_s")])
def test_bad_inputs_name_the_field(kwargs, match) -> None:
    args = {"fixed_s": 1.0, "step_s": 0.1, "median_se_rel": 0.001, "num_steps": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        choose_window(**args)


def _plan(**extra) -> GatePlan:
    base = dict(gate_id=1, gate_dir="/tmp/x", executor="local", roles=["A", "A", "X", "B"],
                sides={}, workload={"recipe": "tiny"}, nodes=1, ranks_per_node=1,
                gpus_per_node=1, num_warmup_steps=2, num_measured_steps=20, health={},
                run_timeout_s=60.0, max_extend=0, policy="sequential", policy_params={},
                kind="candidate", auto_window=True)
    base.update(extra)
    return GatePlan(**base)


def test_driver_calibrates_on_the_conditioning_run_then_sets_one_window() -> None:
    plan = _plan(control_history=[[1.0, 1.001], [2.0, 1.998, 2.001]])
    cal = calibration_plan(plan)
    assert cal.num_measured_steps == CALIBRATION_STEPS and cal.measured_seconds is not None
    steps = [3.0, 0.9] + [0.86 * (1 + 0.002 * ((i * 7) % 5 - 2)) for i in range(12)]
    fields = {"slowest_rank_step_s": steps, "num_warmup_steps": 2, "num_measured_steps": 12,
              "median_step_s": 0.86}
    later, record = choose_after_calibration(plan, fields, {"wall_s": 25.0, "measured_s": 10.3})
    assert record["source"] == "cost-model" and record["between_source"] == "history"
    assert record["fixed_s"] == pytest.approx(14.7) and record["calibration_steps"] == 12
    assert later.num_measured_steps == record["measured_steps"] >= MIN_STEPS
    assert later.measured_seconds is None and later.auto_window
    # nothing to calibrate on: the request's window stays, and the record says why
    same, why = choose_after_calibration(plan, {}, {})
    assert same is plan and why["source"] == "request" and "no step series" in why["reason"]


def test_later_runs_warm_up_for_the_count_the_conditioning_run_showed() -> None:
    """1xH200 shape: step 0 loads the compiled graphs (3.2 s), step 1 is 3% fast, steps 2-4
    agree (the steady rule's confirming steps); later runs warm up for 2 fixed steps."""
    plan = _plan(warmup_mode="steady", num_warmup_steps=2, max_warmup_steps=20)
    steps = [3.16, 0.81, 0.836, 0.834, 0.838] + [0.835 * (1 + 0.001 * (i % 3 - 1))
                                                  for i in range(10)]
    fields = {"slowest_rank_step_s": steps, "num_warmup_steps": 5, "num_measured_steps": 10,
              "median_step_s": 0.835}
    later, record = choose_after_calibration(plan, fields, {"wall_s": 22.0, "measured_s": 8.35})
    assert later.warmup_mode == "fixed" and later.num_warmup_steps == 2
    assert record["warmup_steps"] == 2 and record["calibration_warmup_steps"] == 5
    # the later runs' fixed cost + warmup excludes the three confirming steps they skip
    assert record["fixed_s"] == pytest.approx(22.0 - 8.35 - (0.836 + 0.834 + 0.838))
    # a fixed-warmup gate keeps its own rule
    fixed, rec = choose_after_calibration(_plan(num_warmup_steps=3),
                                          {**fields, "num_warmup_steps": 3},
                                          {"wall_s": 22.0, "measured_s": 8.35})
    assert fixed.warmup_mode == "fixed" and fixed.num_warmup_steps == 3
    assert "warmup_steps" not in rec


def test_learned_warmup_count_bounds() -> None:
    # a run still slow at its last warmup step keeps every warmup step it took
    assert learned_warmup_steps([5.0, 2.0, 1.5, 1.2], 4, 1.0, 2) == 4
    # settled at once: the recipe's minimum stays, and never fewer than one step
    assert learned_warmup_steps([1.0, 1.0, 1.0], 3, 1.0, 2) == 2
    assert learned_warmup_steps([1.0, 1.0, 1.0], 3, 1.0, 0) == 1
    # the 2% tolerance: 2.5% off is unsettled, 1.5% off is settled
    assert learned_warmup_steps([3.0, 1.0, 1.025, 1.015, 1.0], 5, 1.0, 1) == 3
    # the 1xH200 conditioning run of 2026-12-04 (call3 00-A): first step, a 3% fast step,
    # then steps 0.4-1.4% slow: two warmup steps
    h200 = [14.412, 0.8305, 0.8592, 0.8642, 0.8673, 0.8555, 0.8545, 0.8589, 0.8579, 0.8555]
    assert learned_warmup_steps(h200, 5, 0.8556, 1) == 2
