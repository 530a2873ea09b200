"""Decision rules and reasons of one look of the ``sequential`` policy.

The rule table is in ``sequential.py``'s docstring. All numbers here are natural logs
of the candidate/control step-time ratio unless named ``_pct``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.verdict.calibration import NoiseEstimate
from orchestrator.verdict.pattern import Decision
from orchestrator.verdict.policy import SequentialPolicy

NOT_ENOUGH_LOG = math.log(2.0)
"""An interval whose detectable effect exceeds a factor 2 (MDE > 100%) means nothing."""


@dataclass(frozen=True)
class LookStats:
    """Estimate, interval and boundary of one look."""

    index: int
    """0-based look number."""
    effect: float
    """Least-squares candidate minus control, log ratio."""
    se: float
    """Standard error of ``effect``: sigma sqrt(var_factor)."""
    critical: float
    """Multiplier of ``se`` (t scale; inf when the look has no degrees of freedom)."""
    z: float
    """Group-sequential boundary, normal scale (inf when the look spends no error)."""
    p: float
    """Nominal one-sided level of the interval at this look."""
    low: float
    """effect - critical se (capped at -700)."""
    high: float
    """effect + critical se (capped at +700)."""
    mde_log: float
    """(critical + t_power) se: the change detectable with the policy's power."""
    decides: bool
    """True when this look spends error (a crossing is a decision)."""
    num_runs: int
    """Runs of the gate up to this look, conditioning runs included."""


def pct(log_ratio: float) -> float:
    """Return exp(log_ratio) - 1 in percent."""
    return math.expm1(log_ratio) * 100.0


def not_enough(stats: LookStats) -> bool:
    """True when the look's MDE exceeds 100% (the interval means nothing)."""
    return not math.isfinite(stats.mde_log) or stats.mde_log > NOT_ENOUGH_LOG


def describe(stats: LookStats, noise: NoiseEstimate) -> str:
    """One clause with the look's interval and calibration.

    Args:
        stats: The look.
        noise: Its sigma.

    Returns:
        E.g. ``estimate -1.02%, 0.996 interval [-1.8%, -0.2%] (sigma 0.29%, dof 21,
        gate+history)``, or a not-enough-pairs clause.
    """
    calib = f"sigma {noise.sigma * 100:.3f}%, dof {noise.dof}, {noise.source}"
    if not_enough(stats):
        return (f"estimate {pct(stats.effect):+.3f}%, not enough control pairs for an "
                f"interval ({calib})")
    return (f"estimate {pct(stats.effect):+.3f}%, {1 - 2 * stats.p:.4g} interval "
            f"[{pct(stats.low):+.3f}%, {pct(stats.high):+.3f}%] ({calib})")


def decide_look(stats: LookStats, noise: NoiseEstimate, kind: str,
                policy: SequentialPolicy) -> Decision | None:
    """Apply the crossing rules of one look.

    Args:
        stats: The look.
        noise: Its sigma (for the reason).
        kind: ``candidate`` or ``regate``.
        policy: Margins.

    Returns:
        accept/reject/neutral (candidate) or regression/improvement/pass (re-gate) when
        a boundary is crossed, else None.
    """
    if not stats.decides:
        return None
    band = policy.neutral_band_pct
    in_band = band > 0.0 and stats.low > math.log1p(-band / 100.0) \
        and stats.high < math.log1p(band / 100.0)
    if kind == "candidate":
        margin = policy.min_effect_pct
        if stats.high < math.log1p(-margin / 100.0):
            bound = f"-{margin:g}%" if margin else "0%"
            verdict, text = "accept", f"candidate faster {{where}}, entirely below {bound}"
        elif stats.low > math.log1p(margin / 100.0):
            bound = f"+{margin:g}%" if margin else "0%"
            verdict, text = "reject", f"candidate slower {{where}}, entirely above {bound}"
        elif in_band:
            verdict, text = "neutral", f"no effect beyond +-{band:g}% {{where}}: do not adopt"
        else:
            return None
    else:
        margin = policy.tolerance_pct
        if stats.low > 0.0 and stats.effect > math.log1p(margin / 100.0):
            verdict = "regression"
            text = f"timing changed {{where}}, above 0 and estimate > +{margin:g}%"
        elif stats.high < 0.0 and stats.effect < math.log1p(-margin / 100.0):
            verdict = "improvement"
            text = f"timing changed {{where}}, below 0 and estimate < -{margin:g}%"
        elif in_band:
            verdict, text = "pass", f"timing-neutral within +-{band:g}% {{where}}"
        else:
            return None
    where = f"at look {stats.index + 1} ({stats.num_runs} runs): {describe(stats, noise)}"
    return Decision(verdict, text.format(where=where), margin)


def final_decision(stats: LookStats, noise: NoiseEstimate, kind: str,
                   policy: SequentialPolicy) -> Decision:
    """The verdict when the run budget is used up without a crossing.

    Args:
        stats: The last look.
        noise: Its sigma.
        kind: ``candidate`` or ``regate``.
        policy: ``max_mde_pct`` and margins.

    Returns:
        neutral / pass when the MDE is at most ``max_mde_pct``, else inconclusive.
    """
    margin = policy.min_effect_pct if kind == "candidate" else policy.tolerance_pct
    where = f"budget of {stats.num_runs} runs used, look {stats.index + 1}: " \
        f"{describe(stats, noise)}"
    if not_enough(stats):
        return Decision("inconclusive", f"{where}; not enough control pairs (MDE > 100%): "
                        "the allocation is too noisy for this gate", margin)
    mde = mde_pct(stats, kind, policy)
    if mde > policy.max_mde_pct:
        return Decision("inconclusive", f"{where}; minimum detectable effect {mde:.3f}% > "
                        f"max_mde {policy.max_mde_pct:g}%: too noisy to rule out an effect",
                        margin)
    if kind == "candidate":
        return Decision("neutral", f"{where}; no effect of {mde:.3f}% or more: do not adopt",
                        margin)
    return Decision("pass", f"{where}; no change of {mde:.3f}% or more: timing-neutral", margin)


def mde_pct(stats: LookStats, kind: str, policy: SequentialPolicy) -> float:
    """Minimum detectable effect of the look, percent of the control step time.

    Args:
        stats: The look.
        kind: ``candidate`` (a speedup beyond min_effect) or ``regate`` (a change
            beyond tolerance).
        policy: Margins.

    Returns:
        The MDE, percent (capped at 1e6 for JSON).
    """
    if kind == "candidate":
        # accept needs D + c se < ln(1 - min_effect): detectable D = ln(1 - m) - mde_log
        log = stats.mde_log - math.log1p(-policy.min_effect_pct / 100.0)
        return -math.expm1(-log) * 100.0
    log = stats.mde_log + math.log1p(policy.tolerance_pct / 100.0)
    return min(pct(min(log, 14.0)), 1e6)
