"""Pure helpers: a gate's measurement rule, the steps each run takes, its run budget, the ETA.

Every view of a gate (``axbgate show``/``report``/``gate``, the live progress of the CLI and
of the gate page) counts steps and runs the way the driver does (issue 25), from
:class:`MeasurementRule`, never from ``num_warmup_steps + num_measured_steps`` alone:

- a ``fixed`` warmup takes ``warmup_steps``; a ``steady`` one takes between ``warmup_steps``
  and ``max_warmup_steps`` (until the step time settles);
- a fixed window measures ``measured_steps``; a time window of ``S`` seconds measures
  ``max(measured_steps, ceil(S / step time))`` (``trainer.config.MeasureConfig``);
- under ``auto_window`` the conditioning run (order 0) is measured with the calibration
  window (:data:`~orchestrator.domain.cost_model.CALIBRATION_STEPS` steps, at least
  :data:`~orchestrator.domain.cost_model.CALIBRATION_SECONDS` s) and every later run
  with the window the driver recorded in ``status.json`` (``window``: ``measured_steps``
  and, after a steady warmup, the fixed ``warmup_steps`` learned on the conditioning run).

Runs: a ``sequential`` candidate gate starts with its first look (e.g. ``A A X B``) and adds
``X`` + control pairs while undecided, up to the policy's ``max_runs`` (default 14); other
policies add ``X B`` while inconclusive, up to ``max_extend`` times. No database, clock or
filesystem here: callers pass what they read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.domain.cost_model import CALIBRATION_SECONDS, CALIBRATION_STEPS

__all__ = ["MeasurementRule", "RunBudget", "StepRange", "eta_seconds", "measurement_rule",
           "run_budget", "run_position"]



@dataclasses.dataclass(frozen=True)
class StepRange:
    """Steps one run takes: warmup plus measured, as a range while a part is not known yet."""

    warmup_low: int
    """Fewest warmup steps."""
    warmup_high: int
    """Most warmup steps (equal to ``warmup_low`` under a fixed warmup)."""
    measured: int
    """Measured steps (a time window: its step count at the step time given)."""
    measured_known: bool
    """False when a time window's count is only its floor (no step time known yet)."""

    @property
    def low(self) -> int:
        """Fewest steps of the run (warmup plus measured)."""
        return self.warmup_low + self.measured

    @property
    def high(self) -> int:
        """Most steps of the run (warmup plus measured)."""
        return self.warmup_high + self.measured


@dataclasses.dataclass(frozen=True)
class MeasurementRule:
    """How every run of one gate is measured (the gate's own rule, issue 14)."""

    warmup_mode: str
    """``fixed`` or ``steady``."""
    num_warmup_steps: int
    """Warmup steps (``fixed``), or the fewest (``steady``)."""
    max_warmup_steps: int
    """Most warmup steps under ``steady``."""
    num_measured_steps: int
    """Measured steps, or the fewest under a time window."""
    measured_seconds: float | None = None
    """Time window of step time, seconds; None for a fixed count."""
    auto_window: bool = False
    """The cost model chooses the window after the conditioning run."""
    window: Mapping[str, Any] | None = None
    """The driver's ``status.json`` ``window`` record once the cost model chose, else None."""

    def chosen(self) -> bool:
        """True once the cost model's window is known (``window`` from the cost model)."""
        return bool(self.window) and (self.window or {}).get("source") == "cost-model"

    def for_order(self, order: int) -> MeasurementRule:
        """The rule run ``order`` is measured with (the calibration window for run 0 of an
        ``auto_window`` gate, the chosen window for the later runs once it is known)."""
        if not self.auto_window:
            return self
        if order == 0:
            return dataclasses.replace(self, num_measured_steps=CALIBRATION_STEPS,
                                       measured_seconds=CALIBRATION_SECONDS, auto_window=False)
        if not self.chosen():
            return self
        w = self.window or {}
        update: dict[str, Any] = {"num_measured_steps": int(w["measured_steps"]),
                                  "measured_seconds": None, "auto_window": False}
        if w.get("warmup_steps") is not None:
            update.update(warmup_mode="fixed", num_warmup_steps=int(w["warmup_steps"]))
        return dataclasses.replace(self, **update)

    def steps(self, step_s: float | None = None, *, num_warmup_done: int | None = None
              ) -> StepRange:
        """Steps one run takes under this rule (call :meth:`for_order` first).

        Args:
            step_s: Step time, seconds, for a time window (None: unknown, the floor is used).
            num_warmup_done: Warmup steps the run took, when its warmup is over.

        Returns:
            The run's :class:`StepRange`.
        """
        if num_warmup_done is not None:
            low = high = int(num_warmup_done)
        elif self.warmup_mode == "steady":
            low, high = self.num_warmup_steps, max(self.max_warmup_steps, self.num_warmup_steps)
        else:
            low = high = self.num_warmup_steps
        measured, known = self.num_measured_steps, True
        if self.auto_window and not self.chosen():
            known = False
        elif self.measured_seconds is not None:
            if step_s is not None and step_s > 0 and math.isfinite(step_s):
                measured = max(self.num_measured_steps, math.ceil(self.measured_seconds / step_s))
            else:
                known = False
        return StepRange(low, high, measured, known)

    def describe(self) -> str:
        """The rule in words, e.g. ``warmup to steady state (3 to 50 steps), then a 3 s
        window (at least 15 steps)`` or ``10 warmup + 20 measured steps``."""
        if self.warmup_mode == "steady":
            warm = (f"warmup to steady state ({self.num_warmup_steps} to "
                    f"{self.max_warmup_steps} steps)")
        else:
            warm = f"{self.num_warmup_steps} warmup"
        if self.chosen():
            w = self.window or {}
            later = f"{w['measured_steps']} measured steps"
            if w.get("warmup_steps") is not None:
                later = f"{w['warmup_steps']} warmup + {later}"
            return (f"{warm}; the cost model chose {later} per run after the conditioning "
                    f"run (run 0)")
        if self.auto_window:
            return (f"{warm}; the window is chosen by the cost model after the conditioning "
                    "run (run 0)")
        if self.measured_seconds is not None:
            sep = ", then" if self.warmup_mode == "steady" else " +"
            return (f"{warm}{sep} a {self.measured_seconds:g} s window (at least "
                    f"{self.num_measured_steps} measured steps)")
        return f"{warm} + {self.num_measured_steps} measured steps"


def measurement_rule(*, num_warmup_steps: int, num_measured_steps: int,
                     options: Mapping[str, Any] | None,
                     window: Mapping[str, Any] | None = None) -> MeasurementRule:
    """The measurement rule of a stored gate.

    Args:
        num_warmup_steps: ``Gate.num_warmup_steps``.
        num_measured_steps: ``Gate.num_measured_steps``.
        options: ``Gate.options`` (``warmup_mode``, ``max_warmup_steps``,
            ``measured_seconds``, ``auto_window``).
        window: ``status.json`` ``window`` of the gate's driver, when it wrote one.

    Returns:
        The rule.
    """
    o = options or {}
    return MeasurementRule(
        warmup_mode=str(o.get("warmup_mode") or "fixed"),
        num_warmup_steps=int(num_warmup_steps),
        max_warmup_steps=int(o.get("max_warmup_steps") or num_warmup_steps),
        num_measured_steps=int(num_measured_steps),
        measured_seconds=o.get("measured_seconds"),
        auto_window=bool(o.get("auto_window")),
        window=dict(window) if window else None)


@dataclasses.dataclass(frozen=True)
class RunBudget:
    """Runs a gate has planned so far and the most it may take."""

    num_runs_planned: int
    """Runs the gate holds now (a sequential gate adds pairs while undecided)."""
    max_runs: int
    """Most runs the gate may take (sequential ``max_runs``, or the pattern plus
    ``max_extend`` ``X B`` extensions)."""


def run_budget(*, policy: str, policy_params: Mapping[str, Any] | None, kind: str,
               run_pattern: str, num_runs: int, max_extend: int = 0) -> RunBudget:
    """The run budget of a gate.

    Args:
        policy: The gate's primary policy.
        policy_params: Its parameters (``max_runs`` of ``sequential``).
        kind: ``candidate``, ``regate`` or ``bisect``.
        run_pattern: The pattern the gate was stored with, e.g. ``A A X B``.
        num_runs: Runs the gate holds now.
        max_extend: ``Gate.options["max_extend"]`` (non-sequential policies).

    Returns:
        The :class:`RunBudget`; ``max_runs`` is never below ``num_runs_planned``.
    """
    base = len(run_pattern.split())
    planned = max(num_runs, base)
    if policy == "sequential" and kind == "candidate":
        from orchestrator.verdict import get_policy

        try:
            most = int(get_policy("sequential", **dict(policy_params or {})).max_runs)
        except (ValueError, TypeError):
            most = planned
    elif kind == "candidate":
        most = base + 2 * max(0, int(max_extend or 0))
    else:
        most = base
    return RunBudget(planned, max(most, planned))


def run_position(order: int, budget: RunBudget) -> str:
    """``run 5 of 6 planned, at most 14`` for the run at ``order`` (0-based; printed 1-based).

    Args:
        order: The run's position in the pattern, from 0.
        budget: The gate's :class:`RunBudget`.
    """
    text = f"run {order + 1} of {budget.num_runs_planned} planned"
    if budget.max_runs > budget.num_runs_planned:
        text += f", at most {budget.max_runs}"
    return text


def eta_seconds(*, remaining_steps: Sequence[int], step_s: float | None, num_pending: int,
                overhead_s: float, num_more_runs: int = 0, steps_per_run: int = 0
                ) -> float | None:
    """Seconds until the runs end: their remaining steps at ``step_s``, plus the launch
    overhead of each run not started, plus ``num_more_runs`` further runs of
    ``steps_per_run`` steps each (the rest of a budget).

    Args:
        remaining_steps: Steps each unfinished run still takes.
        step_s: Mean step time, seconds (None: unknown, the ETA is None).
        num_pending: Runs among them not started yet.
        overhead_s: Launch plus teardown per run, seconds.
        num_more_runs: Runs beyond the planned ones (0 for the planned runs only).
        steps_per_run: Steps each of those takes.

    Returns:
        Seconds, or None when no step time is known.
    """
    if step_s is None or not math.isfinite(step_s):
        return None
    total = sum(max(0, n) for n in remaining_steps) + num_more_runs * max(0, steps_per_run)
    return total * step_s + (num_pending + num_more_runs) * max(0.0, overhead_s)
