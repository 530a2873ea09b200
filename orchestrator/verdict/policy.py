"""Policies: named, versioned parameter sets of the verdict rules.

Thresholds are fields carrying the DESIGN.md section 3 defaults. A policy's
``version`` is bumped whenever its rules change, so a stored verdict can be
re-derived or explained later.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any, ClassVar


def _check_float(name: str, value: object, *, low: float, low_open: bool,
                 high: float = math.inf, high_open: bool = True) -> None:
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"policy parameter {name} must be a number, got {value!r}")  # noqa: TRY004
    number = float(value)
    too_low = number <= low if low_open else number < low
    too_high = number >= high if high_open else number > high
    if not math.isfinite(number) or too_low or too_high:
        lo_b = "(" if low_open else "["
        hi_b = ")" if high_open else "]"
        raise ValueError(
            f"policy parameter {name} must be finite and in {lo_b}{low}, {high}{hi_b}, "
            f"got {value!r}"
        )


@dataclass(frozen=True)
class Policy:
    """Base of all policies: a name, a version and typed parameters."""

    name: ClassVar[str] = ""
    """Registry name, e.g. ``drift``."""
    version: ClassVar[str] = ""
    """Version of the rules."""

    def _set_float(self, name: str, **bounds: Any) -> None:
        value = getattr(self, name)
        _check_float(name, value, **bounds)
        object.__setattr__(self, name, float(value))

    def _set_int(self, name: str, low: int) -> None:
        value = getattr(self, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"policy parameter {name} must be an integer >= {low}, got {value!r}")

    def params(self) -> dict[str, Any]:
        """Return the parameters as a JSON-safe dict (field name -> value)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class DriftPolicy(Policy):
    """The drift rule of DESIGN.md section 3 (candidate and re-gate tables).

    Candidate: inconclusive when drift > max_drift_pct; accept when
    delta% < -max(drift, min_effect); reject when delta% > +max(drift, min_effect);
    neutral otherwise, and neutral on a sign conflict between candidate copies.
    Re-gate: pass when abs(delta%) <= max(tolerance, drift) or on a sign
    conflict; otherwise regression (delta > 0) or improvement (delta < 0).

    Simulated (benchmarks/results/verdict_power_2026-11-30.txt, run-to-run sd
    0.04-1.5%, no true effect): false accept 20-23% on A X B at every drift level,
    5-8% on A X B X A, 1-2% on A X B X A X B, <1% on 9 runs; power at a true 1%
    speedup on A X B falls from 100% (sd 0.04%) to 32% (sd 1.5%).
    """

    name: ClassVar[str] = "drift"
    version: ClassVar[str] = "1"

    max_drift_pct: float = 2.0
    """Drift above which a candidate gate is inconclusive, percent (DESIGN default 2)."""
    min_effect_pct: float = 0.0
    """Smallest delta a candidate verdict acts on, percent (DESIGN default 0)."""
    tolerance_pct: float = 0.5
    """Re-gate timing-neutral band, percent (DESIGN default 0.5)."""

    def __post_init__(self) -> None:
        self._set_float("max_drift_pct", low=0.0, low_open=True)
        self._set_float("min_effect_pct", low=0.0, low_open=False)
        self._set_float("tolerance_pct", low=0.0, low_open=False)


@dataclass(frozen=True)
class RatioCIPolicy(Policy):
    """Confidence interval of the candidate/control step-time ratio.

    The interval is calibrated on run-to-run spread (DESIGN.md section 3
    caution): the pooled variance of log control medians from this gate's
    controls and from the ledger's control history, never from per-step samples.
    See ``statistical.py`` for the formulas and the verdict rules.

    Simulated (benchmarks/results/verdict_power_2026-11-30.txt): false accept
    0.65% (gate only) and 0.87% (with 20 history pairs) pooled over patterns and
    drift levels, no cell above 1.2%; with 20 history pairs power at a true 1%
    speedup is >= 98% on A X B at run sigma <= 0.17% and 97% on A X B X A X B
    at run sigma 0.29%.
    """

    name: ClassVar[str] = "ratio-ci"
    version: ClassVar[str] = "2"
    """2: most recent min(max_history_gates, available) history entries (1 used only
    50 - available of them when 26-49 were available); sigma floored at
    ``min_sigma_pct``; ``not_enough_control_pairs`` when the MDE exceeds 100%."""

    confidence: float = 0.98
    """Two-sided coverage of the interval; each tail holds (1 - confidence) / 2,
    so 0.98 caps the false-accept rate at 1% when the calibration holds."""
    min_effect_pct: float = 0.0
    """Candidate: accept only when the whole interval is below -min_effect_pct, percent."""
    tolerance_pct: float = 0.5
    """Re-gate: a significant change must also exceed this, percent (DESIGN default 0.5)."""
    max_mde_pct: float = 2.0
    """Candidate: inconclusive instead of neutral when the minimum detectable
    effect exceeds this, percent (the gate could not have seen such an effect)."""
    mde_power: float = 0.95
    """Power at which the minimum detectable effect is reported."""
    max_history_gates: int = 50
    """Most recent ledger entries used for calibration (0: gate only)."""
    require_consistent_sign: bool = True
    """Sign conflict between candidate copies gives neutral / pass (DESIGN.md section 3)."""
    min_sigma_pct: float = 0.05
    """Floor under the run-to-run sigma, percent, when the runs carry no per-step spread
    (identical control medians must not mean zero noise); see ``SequentialPolicy``."""

    def __post_init__(self) -> None:
        self._set_float("min_sigma_pct", low=0.0, low_open=True)
        self._set_float("confidence", low=0.5, low_open=True, high=1.0)
        self._set_float("min_effect_pct", low=0.0, low_open=False)
        self._set_float("tolerance_pct", low=0.0, low_open=False)
        self._set_float("max_mde_pct", low=0.0, low_open=True)
        self._set_float("mde_power", low=0.5, low_open=False, high=1.0)
        self._set_int("max_history_gates", 0)
        if not isinstance(self.require_consistent_sign, bool):
            raise ValueError(  # noqa: TRY004
                "policy parameter require_consistent_sign must be a bool, "
                f"got {self.require_consistent_sign!r}"
            )


@dataclass(frozen=True)
class SequentialPolicy(Policy):
    """Calibrated, sequential candidate/control comparison: the default primary policy.

    Method (``sequential.py``, ``calibration.py``, ``boundaries.py``; docs/design.md
    section "The sequential policy"): the gate starts with one conditioning control run
    and A X B, and while undecided extends the pattern by X + control (alternating A/B)
    up to ``max_runs``. At every look the effect is the least-squares X-minus-control
    difference of log run medians (a linear-trend term from 5 used runs on), its
    run-to-run sigma pools the gate's own residuals with control history of the same
    identity that passes a two-sided F check, weighted by at most ``history_weight``
    history degrees of freedom per own one, floored by the runs' own median standard
    errors, and the
    interval's multiplier is a Lan-DeMets group-sequential boundary (Hwang-Shih-DeCani
    spending) mapped to Student t. Candidate copies whose deltas differ in sign are
    expected noise in a long pattern: the interval decides, there is no sign-conflict
    rule. Simulated error rates and runs used:
    benchmarks/results/verdict_power_sequential_2026-12-01.txt (v1: ..._2026-11-30.txt).
    """

    name: ClassVar[str] = "sequential"
    version: ClassVar[str] = "2"
    """v2 (2026-12-01): history weight capped at 0.25 dof per own dof and a two-sided
    history check at 0.5 / 0.05 (v1: full weight, one-sided 0.05 check); alpha 0.7% ->
    0.55%; max_runs 12 -> 14."""

    alpha: float = 0.0055
    """One-sided error per side over all looks: the designed probability of a false
    accept (and, separately, of a false reject) when the candidate has no effect. 0.55%
    rather than 1%: with sigma estimated on few degrees of freedom the t-mapped
    boundaries let the simulated rates run up to ~1.3 alpha at high noise (0.8-0.9% at
    alpha 0.7% in 20,000-gate checks), and the goal is <= 1% in every cell of 6,000
    simulated gates (Monte Carlo SE 0.13%)."""
    spending_gamma: float = 1.0
    """Hwang-Shih-DeCani spending parameter: 1 spends early (Pocock-like), -4 late
    (O'Brien-Fleming-like); alpha(t) = alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)).
    With max_runs 14 and alpha 0.55% (simulated, sigma 0.25%, no history, 20,000
    gates): gamma 1: power 97.3% in 9.79 runs; 0: 98.3% in 9.88; -1: 98.8% in 10.0;
    2: 95.9% in 9.78."""
    max_runs: int = 14
    """Run budget of the gate on one allocation, conditioning runs included (looks at
    4, 6, 8, 10, 12 and 14 runs). 14 rather than 12 (v1): at alpha 0.55% a 12-run
    budget gives ~95% power at a 1% effect at sigma 0.25% (on the goal's edge), 14
    gives ~97% for +0.3 runs on average (simulated)."""
    num_conditioning_runs: int = 1
    """Leading control runs that are measured and reported but left out of the estimate
    (a cold GPU's first run is faster; see docs/design.md)."""
    min_effect_pct: float = 0.0
    """Candidate: accept only when the whole interval is below -min_effect_pct, reject
    only when it is above +min_effect_pct, percent."""
    neutral_band_pct: float = 1.0
    """Stop early as ``neutral`` (candidate) or ``pass`` (re-gate) once the interval lies
    within +-neutral_band_pct, percent (non-binding: it never adds false decisions)."""
    tolerance_pct: float = 0.5
    """Re-gate: a significant change must also exceed this, percent (DESIGN default 0.5)."""
    max_mde_pct: float = 2.0
    """Budget exhausted and undecided: ``neutral`` when the minimum detectable effect is
    at most this, percent, else ``inconclusive``."""
    mde_power: float = 0.95
    """Power at which the minimum detectable effect is reported."""
    max_history_gates: int = 50
    """Most recent history entries used for calibration (0: the gate's own runs only)."""
    history_check_alpha: float = 0.5
    """Level of the upper-tail F test that drops the history when the gate's own
    residual spread is larger than the history's. 0.5: drop whenever the gate looks
    noisier than its history (a too-quiet history is the dangerous direction)."""
    history_check_low_alpha: float = 0.05
    """Level of the lower-tail F test that drops the history when it is noisier than the
    gate (it would only cost power)."""
    history_weight: float = 0.25
    """Most history degrees of freedom per own residual degree of freedom of the look
    (``calibration.py``): 0.25 keeps false decisions <= 1% when the history under-states
    the gate's sigma by up to 2x (simulated); larger weights decide sooner when the
    history matches but exceed 1% then (at alpha 0.7%, 12 runs: 0.5: 0.9-1.3%, 1:
    1.2-1.9%, full weight (v1): 1.4-8%)."""
    min_sigma_pct: float = 0.05
    """Floor under the run-to-run sigma, percent, when no run carries a median standard
    error (the per-run floor replaces it when larger). 0.05%: below every run-to-run
    sigma seen on 2xH200 (controls 0.04% and 0.13% apart, 7-run A/A sigma ~0.2%,
    issue 12), so it only matters when the medians happen to agree."""
    min_dof: int = 3
    """Looks whose planned degrees of freedom (gate + weighted history) are fewer spend no
    error and decide nothing (with 1-2 dof a t interval is too wide to be worth a look)."""

    def __post_init__(self) -> None:
        self._set_float("alpha", low=0.0, low_open=True, high=0.25)
        self._set_float("spending_gamma", low=-20.0, low_open=False, high=20.0,
                        high_open=False)
        self._set_int("max_runs", 3)
        self._set_int("num_conditioning_runs", 0)
        if self.max_runs < self.num_conditioning_runs + 3:
            raise ValueError(
                f"policy parameter max_runs must be at least num_conditioning_runs + 3 "
                f"(conditioning + A X B), got max_runs={self.max_runs}, "
                f"num_conditioning_runs={self.num_conditioning_runs}"
            )
        self._set_float("min_effect_pct", low=0.0, low_open=False, high=50.0)
        self._set_float("neutral_band_pct", low=0.0, low_open=False, high=50.0)
        self._set_float("tolerance_pct", low=0.0, low_open=False, high=50.0)
        self._set_float("max_mde_pct", low=0.0, low_open=True)
        self._set_float("mde_power", low=0.5, low_open=False, high=1.0)
        self._set_int("max_history_gates", 0)
        self._set_float("history_check_alpha", low=0.0, low_open=False, high=1.0)
        self._set_float("history_check_low_alpha", low=0.0, low_open=False, high=0.5)
        self._set_float("history_weight", low=0.0, low_open=False)
        self._set_float("min_sigma_pct", low=0.0, low_open=True)
        self._set_int("min_dof", 1)
