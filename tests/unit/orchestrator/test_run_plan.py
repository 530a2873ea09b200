"""Step counts, run budget and ETA follow the gate's real measurement rule (issue 25)."""

from __future__ import annotations

import pytest

from orchestrator.executors.driver import window
from orchestrator.usecases.run_plan import (
    eta_seconds,
    measurement_rule,
    run_budget,
    run_position,
)


def test_calibration_constants_match_the_driver():
    from orchestrator.usecases import run_plan

    assert run_plan.CALIBRATION_STEPS == window.CALIBRATION_STEPS == 6
    assert run_plan.CALIBRATION_SECONDS == window.CALIBRATION_SECONDS == 2.0


def test_steady_warmup_and_time_window_give_a_range_and_the_window_count():
    # the CPU demo's rule: steady warmup from 3 steps, a 3 s window of at least 15 steps
    rule = measurement_rule(num_warmup_steps=3, num_measured_steps=15, options={
        "warmup_mode": "steady", "max_warmup_steps": 50, "measured_seconds": 3.0})
    assert rule.describe() == ("warmup to steady state (3 to 50 steps), then a 3 s window "
                               "(at least 15 measured steps)")
    unknown = rule.steps(None)
    assert (unknown.low, unknown.high, unknown.measured_known) == (18, 65, False)
    at_20ms = rule.steps(0.02)  # 3 s / 20 ms = 150 measured steps, not 15
    assert (at_20ms.measured, at_20ms.low, at_20ms.high, at_20ms.measured_known) == (150, 153, 200, True)
    done = rule.steps(0.02, num_warmup_done=7)
    assert (done.low, done.high) == (157, 157)


def test_fixed_rule_is_warmup_plus_measured():
    rule = measurement_rule(num_warmup_steps=10, num_measured_steps=20, options={})
    assert rule.describe() == "10 warmup + 20 measured steps"
    assert (rule.steps(0.5).low, rule.steps(0.5).high) == (30, 30)
    assert rule.for_order(3) == rule


def test_auto_window_uses_calibration_then_the_drivers_window_record():
    options = {"warmup_mode": "steady", "max_warmup_steps": 50, "auto_window": True}
    rule = measurement_rule(num_warmup_steps=2, num_measured_steps=3, options=options)
    assert "chosen by the cost model after the conditioning run" in rule.describe()
    first = rule.for_order(0).steps(0.1)  # calibration: max(10, ceil(2 s / 0.1 s)) = 20
    assert first.measured == 20 and first.measured_known
    assert not rule.for_order(1).steps(0.1).measured_known  # window not chosen yet
    record = {"source": "cost-model", "measured_steps": 37, "warmup_steps": 4,
              "calibration_warmup_steps": 9, "warmup_source": "conditioning run"}
    chosen = measurement_rule(num_warmup_steps=2, num_measured_steps=3, options=options,
                              window=record)
    later = chosen.for_order(5).steps(0.1)
    assert (later.low, later.high, later.measured_known) == (41, 41, True)
    assert chosen.describe() == ("warmup to steady state (2 to 50 steps); the cost model chose "
                                 "4 warmup + 37 measured steps per run after the conditioning "
                                 "run (run 0)")


def test_sequential_budget_is_planned_runs_and_max_runs():
    budget = run_budget(policy="sequential", policy_params={}, kind="candidate",
                        run_pattern="A A X B", num_runs=6)
    assert (budget.num_runs_planned, budget.max_runs) == (6, 14)
    assert run_position(4, budget) == "run 5 of 6 planned, at most 14"
    small = run_budget(policy="sequential", policy_params={"max_runs": 8}, kind="candidate",
                       run_pattern="A A X B", num_runs=4)
    assert small.max_runs == 8


@pytest.mark.parametrize(("max_extend", "most"), [(0, 3), (2, 7)])
def test_drift_budget_counts_the_x_b_extensions(max_extend, most):
    budget = run_budget(policy="drift", policy_params={}, kind="candidate", run_pattern="A X B",
                        num_runs=3, max_extend=max_extend)
    assert budget.max_runs == most
    assert run_position(2, budget) == ("run 3 of 3 planned" if most == 3
                                       else f"run 3 of 3 planned, at most {most}")


def test_eta_counts_remaining_steps_overheads_and_the_rest_of_the_budget():
    # two runs left: 10 and 30 steps at 0.5 s, one of them not started (2 s launch)
    assert eta_seconds(remaining_steps=[10, 30], step_s=0.5, num_pending=1, overhead_s=2.0) == 22.0
    # to the budget: 8 more runs of 30 steps, each with its launch
    assert eta_seconds(remaining_steps=[10, 30], step_s=0.5, num_pending=1, overhead_s=2.0,
                       num_more_runs=8, steps_per_run=30) == 22.0 + 8 * (15.0 + 2.0)
    assert eta_seconds(remaining_steps=[5], step_s=None, num_pending=0, overhead_s=1.0) is None
