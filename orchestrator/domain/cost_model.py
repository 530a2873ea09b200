"""The measurement window that minimises GPU-seconds per decision (issue 23).

A gate's cost is paid per run: a fixed part (launch, process group, model build, warmup,
teardown: ``fixed_s``) that no window shortens, and the window itself (n measured steps of
``step_s``). The window sets the noise of a run median, and the noise sets how many runs
the sequential policy needs before it decides:

    sigma(n)^2 = sigma_between^2 + se_1^2 / n          (se_1: one step's median error)
    cost(n)    = (fixed_s + n step_s) x R(sigma(n))     GPU-seconds per GPU

with R(sigma) the policy's mean runs per gate divided by its share of decided gates,
averaged over no effect and a 1% effect (``runs_table.json``, written by
``benchmarks/verdict_noise.py --write-runs-table``: 10,000 simulated gates per sigma). The
allocation measures its own inputs on the conditioning run (a control run the estimate
leaves out anyway): its fixed cost and warmup, its steady step time, and its median's
exact-bootstrap standard error, scaled to n steps by sqrt(n_cal / n) (the median of n
independent steps has an error proportional to 1 / sqrt(n); autocorrelated steps make that
optimistic, which only costs runs, never error rates: sigma is measured from the runs).
The between-run part comes from the control history of the same identity when it has one
(its spread minus the conditioning run's within-run part), else ``DEFAULT_BETWEEN_SIGMA``.

A window under ``MIN_STEPS`` steps is never chosen: the median of 5 steps moves by at most
one order statistic when one step hiccups (a single slow step cannot carry the run). Nor is
one longer than ``MAX_WINDOW_S``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["CALIBRATION_SECONDS", "CALIBRATION_STEPS", "DEFAULT_BETWEEN_SIGMA", "MIN_STEPS", "WindowChoice", "choose_window",
           "runs_per_decision"]

CALIBRATION_STEPS = 6
"""Fewest steps the conditioning run measures under ``auto_window`` (2026-12-05: 10 -> 6,
3.5 s less per gate on 1xH200; the error of a 6-step median's bootstrap error only moves
the window choice, never an error rate: sigma is measured from the runs) ..."""
CALIBRATION_SECONDS = 2.0
"""... and at least this many seconds of steps (short CPU steps: more of them)."""
MIN_STEPS = 5
"""Fewest measured steps the cost model chooses (a median one slow step cannot move far)."""
MAX_STEPS = 2000
"""Most measured steps it considers ..."""
MAX_WINDOW_S = 60.0
"""... and the longest window, seconds (issue 14's default window; past it a noisy
allocation is better told inconclusive than measured for minutes per run)."""
DEFAULT_BETWEEN_SIGMA = 0.0005
"""Between-run sigma of log run medians assumed without history: 0.05%. On 1xH200 the
control runs of a gate were 0.06-0.08% apart at 20 s windows whose medians carried about
0.04% of within-run error (benchmarks/results/gate_cost_h200x1_2026-12-01)."""
_TABLE = Path(__file__).with_name("runs_table.json")


@lru_cache(maxsize=1)
def _table() -> list[dict]:
    return json.loads(_TABLE.read_text(encoding="utf-8"))["rows"]


def runs_per_decision(sigma: float) -> float:
    """Expected runs per decided gate at run sigma ``sigma`` (fraction of the step time).

    Linear interpolation of ``runs_table.json`` in sigma (clamped at its ends), of
    mean runs / share decided, averaged over no effect and a 1% speedup.

    Raises:
        ValueError: sigma not positive and finite.
    """
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be positive and finite, got {sigma!r}")
    rows = _table()

    def value(row: dict) -> float:
        return 0.5 * sum(row[f"runs_{k}"] / max(row[f"decided_{k}"], 1e-3)
                         for k in ("null", "effect_1pct"))

    pct = sigma * 100.0
    if pct <= rows[0]["sigma_pct"]:
        return value(rows[0])
    for lo, hi in zip(rows, rows[1:]):
        if pct <= hi["sigma_pct"]:
            w = (pct - lo["sigma_pct"]) / (hi["sigma_pct"] - lo["sigma_pct"])
            return (1 - w) * value(lo) + w * value(hi)
    return value(rows[-1])


@dataclass(frozen=True)
class WindowChoice:
    """The window the allocation measures its used runs with, and why."""

    measured_steps: int
    """Steps each used run measures."""
    run_sigma: float
    """Expected sigma of a run median at that window (fraction)."""
    runs_per_decision: float
    """Expected runs per decided gate at that sigma."""
    expected_run_s: float
    """Expected seconds per run (fixed cost + window)."""
    expected_gpu_s: float
    """Expected GPU-seconds of the runs per decision (x ``num_gpus``), health excluded."""
    fixed_s: float
    """Measured per-run fixed cost (launch, build, warmup, teardown), seconds."""
    step_s: float
    """Measured steady step time, seconds."""
    step_median_se: float
    """Median standard error of ONE step (relative): the conditioning run's median error
    times sqrt(its measured steps)."""
    between_sigma: float
    """Between-run sigma used (fraction) and ..."""
    between_source: str
    """... where it came from: ``history`` or ``default``."""

    def to_dict(self) -> dict:
        """JSON-safe dict of the fields."""
        return asdict(self)


def choose_window(*, fixed_s: float, step_s: float, median_se_rel: float, num_steps: int,
                  history_sigma: float | None = None, num_gpus: int = 1,
                  max_window_s: float = MAX_WINDOW_S) -> WindowChoice:
    """The measured steps per run that minimise expected GPU-seconds per decision.

    Args:
        fixed_s: The calibration run's wall time minus its measured window, seconds.
        step_s: Its median measured step time, seconds (> 0).
        median_se_rel: Its median's standard error / median (>= 0).
        num_steps: Steps it measured (>= 1).
        history_sigma: Sigma of log control medians of the same control identity in
            earlier gates (fraction), or None.
        num_gpus: GPUs of the allocation (GPU-seconds = seconds x GPUs; >= 1).
        max_window_s: Longest window considered, seconds (``MIN_STEPS`` always is).

    Returns:
        The :class:`WindowChoice`.

    Raises:
        ValueError: A non-positive step time or step count, or a negative cost or error.
    """
    if not (math.isfinite(step_s) and step_s > 0):
        raise ValueError(f"step_s must be positive, got {step_s!r}")
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps!r}")
    if not (math.isfinite(fixed_s) and fixed_s >= 0) or not median_se_rel >= 0:
        raise ValueError(f"fixed_s and median_se_rel must be >= 0, got {fixed_s!r}, "
                         f"{median_se_rel!r}")
    se_1 = median_se_rel * math.sqrt(num_steps)
    if history_sigma is not None and history_sigma > 0:
        between = math.sqrt(max(history_sigma**2 - median_se_rel**2, 0.0))
        between, source = max(between, 0.5 * DEFAULT_BETWEEN_SIGMA), "history"
    else:
        between, source = DEFAULT_BETWEEN_SIGMA, "default"
    best = None
    n = MIN_STEPS
    while n <= MAX_STEPS and (n == MIN_STEPS or n * step_s <= max_window_s):
        sigma = math.sqrt(between**2 + se_1**2 / n)
        runs = runs_per_decision(sigma)
        cost = (fixed_s + n * step_s) * runs
        if best is None or cost < best[0] - 1e-9:
            best = (cost, n, sigma, runs)
        n += 1 if n < 40 else max(1, n // 20)
    cost, n, sigma, runs = best
    return WindowChoice(measured_steps=n, run_sigma=sigma, runs_per_decision=runs,
                        expected_run_s=fixed_s + n * step_s,
                        expected_gpu_s=cost * max(num_gpus, 1), fixed_s=fixed_s, step_s=step_s,
                        step_median_se=se_1, between_sigma=between, between_source=source)
