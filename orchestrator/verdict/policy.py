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

    Method (``seqcore.py`` for the arithmetic of a look, ``sequential.py`` for the walk
    over looks, ``design.py`` for the run order; docs/design.md section 3.1): one
    conditioning control run, then A X B, then X + control pairs in randomised mirrored
    blocks (``X C C X`` / ``C X X C``, seeded) up to ``max_runs``, looked at after A X B
    and after every pair. At a look the effect is the least-squares X-minus-control
    difference of log run medians (a linear trend from 5 used runs on); its run-to-run
    sigma pools the gate's own residuals with control history of the same identity that
    passes a two-sided F check, weighted by at most ``history_weight`` history degrees of
    freedom per own one, floored by the runs' own median standard errors; the interval's
    multiplier is a group-sequential boundary (Lan-DeMets, Hwang-Shih-DeCani spending)
    mapped to Student t. Robustness (v3): a run whose externally studentised residual is
    beyond a Bonferroni t bound and which lies apart from every other run is left out and
    measured again (at most ``max_replacements``); runs that fall into two states with a
    gap far above their spread get the state as a covariate; an accept or reject is held
    back while the split of the runs into candidate and control could be a chance split
    of two run states (``split_alpha``). A consistent history opens an early deciding
    look after 6 runs. Simulated error rates, power and GPU-seconds per noise family:
    benchmarks/results/verdict_noise_*.txt.
    """

    name: ClassVar[str] = "sequential"
    version: ClassVar[str] = "3"
    """v3 (2026-12-02): randomised mirrored blocks (``design``), outlier runs measured
    again, two-state covariate and split guard, an early look with consistent history,
    alpha 0.55% -> 0.4% and spending_gamma 1 -> 0 (bimodal run states make a t interval
    on few degrees of freedom anti-conservative: benchmarks/results/verdict_noise_*).
    v2 (2026-12-01): history weight capped at 0.25 dof per own dof, two-sided history
    check at 0.5 / 0.05, alpha 0.7% -> 0.55%, max_runs 12 -> 14."""

    alpha: float = 0.004
    """One-sided error per side over all looks: the designed probability of a false
    accept (and, separately, of a false reject) when the candidate has no effect. Below
    the 1% goal because the simulated rates run above alpha where sigma is estimated on
    few degrees of freedom and where run medians fall into two states (up to ~1.9x alpha
    at 7 runs for a 50/50 mixture 4 sigma apart; benchmarks/results/verdict_noise_*)."""
    spending_gamma: float = 0.0
    """Hwang-Shih-DeCani spending parameter: 1 spends early (Pocock-like), -4 late
    (O'Brien-Fleming-like); alpha(t) = alpha (1 - exp(-gamma t)) / (1 - exp(-gamma)),
    alpha t at 0 (v3; v2: 1)."""
    max_runs: int = 14
    """Run budget of the gate on one allocation, conditioning runs included (looks at
    4, 6, 8, 10, 12 and 14 runs); runs measured again add to it."""
    num_conditioning_runs: int = 1
    """Leading control runs that are measured and reported but left out of the estimate
    (a cold GPU's first run is faster; see docs/design.md)."""
    design: str = "mirror"
    """Run order after A X B: ``mirror`` (randomised ``X C C X`` / ``C X X C`` blocks) or
    ``alternate`` (``X A X B ...``, v1/v2); see ``design.py``."""
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
    the gate's sigma by up to 2x (simulated)."""
    min_sigma_pct: float = 0.05
    """Floor under the run-to-run sigma, percent, when no run carries a median standard
    error (the per-run floor replaces it when larger)."""
    min_dof: int = 3
    """Looks whose planned degrees of freedom (gate + weighted history) are fewer spend no
    error and decide nothing, except the early look below."""
    early_history_dof: int = 4
    """At a look with 2 own degrees of freedom (A X B + one pair), a history that passes
    the F check adds this many degrees of freedom and the look may decide (0: no early
    look). The early look spends ``early_alpha_fraction`` of alpha."""
    early_alpha_fraction: float = 0.2
    """Share of alpha spent by the early look (the rest by the regular looks)."""
    early_gate_alpha: float = 0.025
    """The early look decides only when the gate's own runs alone, at their 2 degrees of
    freedom, also put the effect beyond the one-sided t quantile of this level: a history
    the F check cannot tell from a twice-too-quiet one on 2 dof never decides alone
    (measured: anti-correlated runs with a history half as noisy as the gate gave 1.2-1.3%
    false decisions without it)."""
    max_replacements: int = 2
    """Outlier runs left out and measured again per gate (0: none). Each one adds a run."""
    outlier_level: float = 0.05
    """Level of the outlier test per look: a run is an outlier when its externally
    studentised residual exceeds the Student t quantile 1 - level / (2 n) at n - p - 1
    degrees of freedom (Bonferroni over the n used runs; Cook & Weisberg 1982, Residuals
    and Influence in Regression, sec. 2.2) ..."""
    outlier_gap: float = 3.0
    """... and it lies outside the range of every other run, at least this many of its
    leave-one-out sigmas from the nearest (a run at the other side's level is a state,
    not an outlier)."""
    state_separation: float = 6.0
    """Two run states: the best split of the used runs' detrended log medians into two
    groups of >= 2 has a gap of at least this many pooled within-group sigmas, and is
    not the candidate/control split itself; the state then enters the fit as a
    covariate. 6: the best split of n normal runs reaches it in 3.9% (n = 7), 1.5% (9),
    0.6% (11) and 0.3% (13) of gates (20,000 draws each, ``seqfit.best_split``); the
    fit with the covariate is then merely less efficient, not biased."""
    split_alpha: float = 0.0055
    """An accept or reject whose effect exceeds ``split_effect_sigmas`` run sigmas is held
    back while the probability that two run states (any share) line up with the
    candidate/control split at least this well exceeds this (conditioning runs count as
    controls; 0.0055 lets a clean split of 3 candidates and 5 controls, p = 0.50%, decide)."""
    split_effect_sigmas: float = 3.0
    """Effect, in run sigmas, above which the split guard applies."""
    history_gap_sigmas: float = 4.0
    """A consistent history lifts the split guard when the effect exceeds this many
    history sigmas: two run states that far apart would have shown in the history."""

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
        from orchestrator.verdict.design import DESIGNS

        if self.design not in DESIGNS:
            raise ValueError(f"policy parameter design must be one of {', '.join(DESIGNS)}, "
                             f"got {self.design!r}")
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
        self._set_int("early_history_dof", 0)
        self._set_float("early_alpha_fraction", low=0.0, low_open=True, high=1.0)
        self._set_float("early_gate_alpha", low=0.0, low_open=True, high=0.5)
        self._set_int("max_replacements", 0)
        self._set_float("outlier_level", low=0.0, low_open=True, high=1.0)
        self._set_float("outlier_gap", low=0.0, low_open=False)
        self._set_float("state_separation", low=0.0, low_open=True)
        self._set_float("split_alpha", low=0.0, low_open=False, high=1.0, high_open=False)
        self._set_float("split_effect_sigmas", low=0.0, low_open=False)
        self._set_float("history_gap_sigmas", low=0.0, low_open=False)
