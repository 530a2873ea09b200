"""The cost model's window on the allocation: calibrate on the conditioning run, then choose.

A gate with ``auto_window`` measures its conditioning run (a control the estimate leaves
out) with a calibration window, reads off that run what the allocation costs and how noisy
its steps are, and gives every later run the window of ``domain.cost_model.choose_window``.
All later runs share that window and, where the gate warms up to a ``steady`` state, a fixed
warmup count read off the conditioning run (:func:`learned_warmup_steps`), so the gate's
measurement rule is still one rule for the runs it judges. Everything is read from the run's own parsed and hashed log (its
``fields``) and the driver's own clock (``phases``), never from files the run wrote.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from orchestrator.domain.cost_model import CALIBRATION_SECONDS, CALIBRATION_STEPS
from orchestrator.executors.plan import GatePlan

__all__ = ["CALIBRATION_SECONDS", "CALIBRATION_STEPS", "STEADY_TOLERANCE", "calibration_plan",
           "choose_after_calibration", "learned_warmup_steps", "recipe_overrides"]



def calibration_plan(plan: GatePlan) -> GatePlan:
    """The plan the conditioning run is measured with (a calibration window)."""
    return dataclasses.replace(plan, num_measured_steps=CALIBRATION_STEPS,
                               measured_seconds=CALIBRATION_SECONDS)


def _history_sigma(pairs: list[list[float]]) -> float | None:
    """Pooled sigma of log control medians within each history entry, or None."""
    ss, dof = 0.0, 0
    for entry in pairs:
        logs = [math.log(v) for v in entry if v and v > 0]
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            dof += len(logs) - 1
    return math.sqrt(ss / dof) if dof else None


STEADY_TOLERANCE = 0.02
"""A warmup step of the conditioning run counts as settled when it lies within 2% of the
run's measured median. What it must catch on 1xH200 is the first step (compiled-graph load,
3-15 s) and the second (~3% fast); at 1% it also caught steps 2-4, which run 0.5-1.4% slow in
every run (2026-12-04 logs, benchmarks/results/decision_cost_h200x1_2026-12-04/), and cost
2-3 steps per run: measuring from step 2 left the controls' run sigma at 0.20% (mean of five
gates, 0.20% from the later steps) and every gate's effect within 0.07 points."""


def learned_warmup_steps(times: list[float], num_warmup_steps: int, median_step_s: float,
                         minimum: int) -> int:
    """Warmup steps the later runs of the allocation need, read off the conditioning run.

    A ``steady`` warmup spends ``steady_window`` agreeing steps to see that the step time
    settled; the conditioning run has already shown where it settles on this allocation
    (the first step loads the compiled graphs, the next ones may differ by a few percent),
    so the later runs warm up for a fixed count: one past the last of its warmup steps that
    lies outside ``STEADY_TOLERANCE`` of its measured median. Every judged run then shares
    one fixed rule, and each skips the confirming steps (on 1xH200: 5 -> 2 warmup steps,
    about 2.5 s of a 0.83 s step per run).

    Args:
        times: The conditioning run's slowest-rank step times, warmup then measured, seconds.
        num_warmup_steps: How many of them were warmup.
        median_step_s: Its measured median step time, seconds (> 0).
        minimum: The gate's fewest warmup steps (the recipe's ``warmup_steps``).

    Returns:
        The fixed warmup count, in ``[max(1, minimum), max(num_warmup_steps, minimum)]``.
    """
    last_off = -1
    for i, t in enumerate(times[:num_warmup_steps]):
        if abs(t / median_step_s - 1.0) > STEADY_TOLERANCE:
            last_off = i
    low = max(1, minimum)
    return min(max(low, last_off + 1), max(num_warmup_steps, low))


def choose_after_calibration(plan: GatePlan, fields: dict[str, Any],
                             phases: dict[str, float]) -> tuple[GatePlan, dict[str, Any]]:
    """The plan of the runs after the conditioning run, and the record of the choice.

    Args:
        plan: The gate's plan (its warmup rule; ``control_history``).
        fields: The conditioning run's measured fields (``slowest_rank_step_s``,
            ``num_warmup_steps``, ``num_measured_steps``, ``median_step_s``).
        phases: Its phases from the driver's clock (``wall_s``, ``measured_s``).

    Returns:
        ``(plan with num_measured_steps = the chosen count and no time window, and under a
        ``steady`` warmup a fixed warmup of :func:`learned_warmup_steps`, record)``;
        the record (``status.json`` ``window``) holds the inputs, the choice and its
        expected cost, or, when the run gave nothing to calibrate on, the reason the
        request's window was kept.
    """
    from orchestrator.domain.cost_model import choose_window
    from orchestrator.verdict import run_statistics

    times = fields.get("slowest_rank_step_s") or []
    warmup, measured = fields.get("num_warmup_steps"), fields.get("num_measured_steps")
    wall, window_s = phases.get("wall_s"), phases.get("measured_s")
    if not times or warmup is None or not measured or wall is None or window_s is None:
        return plan, {"source": "request", "reason": "the conditioning run gave no step series "
                      "or timeline to calibrate on", "measured_steps": plan.num_measured_steps}
    stats = run_statistics(times, num_warmup_steps=warmup, num_measured_steps=measured)
    gpus = max(1, plan.nodes * plan.gpus_per_node)
    fixed_s = max(0.0, float(wall) - float(window_s))
    warm_update: dict[str, Any] = {}
    warm_record: dict[str, Any] = {}
    if plan.warmup_mode == "steady":
        learned = learned_warmup_steps(times, int(warmup), stats.median_step_s,
                                       plan.num_warmup_steps)
        saved = sum(times[learned:int(warmup)])
        fixed_s = max(0.0, fixed_s - saved)  # what a later run's fixed cost + warmup will be
        warm_update = {"warmup_mode": "fixed", "num_warmup_steps": learned}
        warm_record = {"warmup_steps": learned, "calibration_warmup_steps": int(warmup),
                       "warmup_source": f"conditioning run: steps after {learned - 1} within "
                                        f"{STEADY_TOLERANCE:.0%} of its median"}
    choice = choose_window(
        fixed_s=fixed_s, step_s=stats.median_step_s,
        median_se_rel=(stats.median_se_s or 0.0) / stats.median_step_s,
        num_steps=stats.num_measured_steps, history_sigma=_history_sigma(plan.control_history),
        num_gpus=gpus, max_window_s=plan.max_window_s)
    record = {"source": "cost-model", "calibration_run": 0,
              "calibration_steps": stats.num_measured_steps, **choice.to_dict(), **warm_record}
    return dataclasses.replace(plan, num_measured_steps=choice.measured_steps,
                               measured_seconds=None, **warm_update), record


def recipe_overrides(plan: GatePlan, side: str) -> list[str]:
    """The bundled trainer's overrides of one side: its own, then the gate's measurement
    rule of this phase (the calibration window, or the window every later run shares)."""
    overrides = [
        *plan.sides[side].get("recipe_overrides", []),
        f"measure.warmup_steps={plan.num_warmup_steps}",
        f"measure.measured_steps={plan.num_measured_steps}",
        f"measure.warmup_mode={plan.warmup_mode}",
        f"measure.max_warmup_steps={plan.max_warmup_steps}",
    ]
    # always set: a recipe's own window must not stay when the gate measures a count
    window = "none" if plan.measured_seconds is None else plan.measured_seconds
    overrides.append(f"measure.measured_seconds={window}")
    return overrides
