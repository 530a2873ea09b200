"""The ``ratio-ci`` policy: interval of the candidate/control ratio, MDE, verdicts.

Model (DESIGN.md section 3 caution): the log run median of run j is
ln t_j = mu + effect * [j is X] + e_j, with e_j independent N(0, s^2) run-to-run
(allocation) noise that already contains the per-step noise of a run median.
Per-step samples are never used: they do not see the run-to-run noise.

* Estimate D = mean over copies of ln X_i - (ln L_i + ln R_i) / 2 (``pattern.py``);
  Var(D) = s^2 * sum_j w_j^2.
* s^2 is the pooled sample variance of log control medians: each group of
  controls (this gate's controls; each ledger entry of earlier control medians,
  the most recent min(max_history_gates, available)) contributes its sum of squared
  deviations from the group mean and (size - 1) degrees of freedom. A (A, B) pair
  contributes (ln A - ln B)^2 / 2 and one degree of freedom. s is floored by
  ``calibration.sigma_floor`` (the runs' median standard errors, or ``min_sigma_pct``):
  identical control medians do not mean zero noise.
* Interval: D +- t_{1 - a/2, dof} * s * sqrt(sum w^2), a = 1 - confidence
  (Student t; e.g. Montgomery, Design and Analysis of Experiments, ch. 2),
  reported as exp(bound) - 1 in percent.
* MDE: smallest true speedup found with probability ``mde_power``:
  ln(1 - MDE) = ln(1 - min_effect) - (t_{1 - a/2, dof} + t_{power, dof}) * SE
  (normal-theory approximation with t quantiles; e.g. Cohen 1988, ch. 2).

Candidate verdicts:

| condition                                         | verdict      |
|---------------------------------------------------|--------------|
| copies disagree in sign (require_consistent_sign) | neutral      |
| interval upper bound < -min_effect                | accept       |
| interval lower bound > +min_effect                | reject       |
| MDE > max_mde                                     | inconclusive |
| otherwise                                         | neutral      |

An interval whose MDE, as a ratio, exceeds 100% sets ``not_enough_control_pairs`` and
its reason says "not enough control pairs" instead of printing absurd percentages.

Re-gate verdicts: ``regate.py``. Simulated false-accept rate and power:
benchmarks/results/verdict_power_*.txt.
"""

from __future__ import annotations

import math
from functools import lru_cache

from scipy import stats as _scipy_stats

from orchestrator.verdict.calibration import select_history, sigma_floor
from orchestrator.verdict.model import ControlHistory, RunSummary
from orchestrator.verdict.pattern import Decision, GateNumbers
from orchestrator.verdict.policy import RatioCIPolicy
from orchestrator.verdict.result import StatisticalDetail

_MAX_LOG = 700.0
_NOT_ENOUGH_LOG = math.log(2.0)


@lru_cache(maxsize=4096)
def _t_quantile(q: float, dof: int) -> float:
    return float(_scipy_stats.t.ppf(q, dof))


def _sum_sq_dev(logs: tuple[float, ...] | list[float]) -> float:
    mean = math.fsum(logs) / len(logs)
    return math.fsum((x - mean) ** 2 for x in logs)


def compute_ratio_interval(
    numbers: GateNumbers,
    policy: RatioCIPolicy,
    history: ControlHistory | None,
    *,
    kind: str,
    runs: tuple[RunSummary, ...] = (),
) -> StatisticalDetail:
    """Interval, MDE and calibration of the candidate/control ratio.

    Args:
        numbers: The gate's log contrast and control log medians.
        policy: Confidence, MDE power, min_effect / tolerance, history depth, floor.
        history: Earlier control medians of the same control identity, or None.
        kind: ``candidate`` (MDE is a speedup beyond min_effect) or ``regate``
            (MDE is a change that is significant and beyond tolerance).
        runs: The gate's runs, for the sigma floor from their median standard errors.

    Returns:
        The :class:`StatisticalDetail`, percentages of control step time.
    """
    controls = numbers.control_log_medians
    gate_dof = len(controls) - 1
    selection = select_history(history, policy.max_history_gates)
    ss = _sum_sq_dev(controls) + selection.sum_sq
    hist_dof = selection.dof
    used = selection.entries
    dof = gate_dof + hist_dof
    floor = sigma_floor(runs, policy.min_sigma_pct)
    estimate = math.sqrt(ss / dof)
    sigma = max(estimate, floor)
    se = sigma * math.sqrt(numbers.contrast_sum_sq_weights)
    t_ci = _t_quantile(0.5 + policy.confidence / 2.0, dof)
    t_pow = _t_quantile(policy.mde_power, dof)
    d = numbers.log_contrast
    if kind == "candidate":
        mde_log = -math.log1p(-policy.min_effect_pct / 100.0) + (t_ci + t_pow) * se
        mde_pct = -math.expm1(-mde_log) * 100.0
    else:
        mde_log = max((t_ci + t_pow) * se, math.log1p(policy.tolerance_pct / 100.0) + t_pow * se)
        mde_pct = math.expm1(min(mde_log, _MAX_LOG)) * 100.0
    half = min(t_ci * se, _MAX_LOG)
    return StatisticalDetail(
        ratio_pct=math.expm1(d) * 100.0,
        ci_low_pct=math.expm1(d - half) * 100.0,
        ci_high_pct=math.expm1(d + half) * 100.0,
        confidence=policy.confidence,
        mde_pct=mde_pct,
        mde_power=policy.mde_power,
        run_sigma_pct=sigma * 100.0,
        dof=dof,
        num_gate_control_pairs=gate_dof,
        num_history_pairs=hist_dof,
        num_history_gates=len(used),
        calibration="floor" if estimate < floor else ("gate+history" if used else "gate"),
        sigma_floor_pct=floor * 100.0,
        not_enough_control_pairs=(t_ci + t_pow) * se > _NOT_ENOUGH_LOG,
        num_history_gates_available=selection.num_available,
    )


def decide_ratio_ci_candidate(
    numbers: GateNumbers, stats: StatisticalDetail, policy: RatioCIPolicy
) -> Decision:
    """Apply the ratio-interval rule to a candidate gate (table in the module docstring).

    Args:
        numbers: The gate's numbers (for the sign conflict).
        stats: The interval and MDE, percent.
        policy: Uses ``min_effect_pct``, ``max_mde_pct``, ``require_consistent_sign``.

    Returns:
        The :class:`Decision`; ``threshold_pct`` = min_effect.
    """
    margin = policy.min_effect_pct
    interval = (
        f"{stats.confidence:g} interval [{stats.ci_low_pct:+.3f}%, {stats.ci_high_pct:+.3f}%] "
        f"(s={stats.run_sigma_pct:.3f}%, dof={stats.dof})"
    )
    if policy.require_consistent_sign and numbers.sign_conflict:
        return Decision(
            "neutral",
            "candidate copies disagree in sign (copy deltas "
            + ", ".join(f"{b.delta_pct:+.3f}%" for b in numbers.brackets)
            + ")",
            margin,
        )
    if stats.ci_high_pct < -margin:
        return Decision("accept", f"{interval} is below -{margin:g}%", margin)
    if stats.ci_low_pct > margin:
        return Decision("reject", f"{interval} is above +{margin:g}%", margin)
    if stats.not_enough_control_pairs:
        return Decision(
            "inconclusive",
            f"not enough control pairs for an interval (estimate {stats.ratio_pct:+.3f}%, "
            f"s={stats.run_sigma_pct:.3f}%, dof={stats.dof}; MDE > 100%): add control pairs "
            "(longer pattern or ledger history)",
            margin,
        )
    if stats.mde_pct > policy.max_mde_pct:
        return Decision(
            "inconclusive",
            f"{interval} includes {margin:g}% and the minimum detectable effect "
            f"{stats.mde_pct:.3f}% > max_mde {policy.max_mde_pct:g}%: add control pairs "
            "(longer pattern or ledger history)",
            margin,
        )
    return Decision(
        "neutral",
        f"{interval} includes {margin:g}%; effects >= {stats.mde_pct:.3f}% would have been "
        "detected: do not adopt",
        margin,
    )
