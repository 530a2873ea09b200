"""Re-gate verdicts (DESIGN.md section 3): did a new commit change timing?

Both policies answer pass (timing-neutral), regression or improvement. A sign
conflict between candidate copies of a long pattern is ``pass``: no consistent
change, the re-gate analogue of the candidate rule's ``neutral``.

* ``drift``: pass when abs(delta%) <= max(tolerance, drift); otherwise
  regression (delta > 0) or improvement (delta < 0).
* ``ratio-ci``: regression when the interval's lower bound is > 0 (significant)
  and the ratio estimate exceeds +tolerance (material); improvement mirrored;
  pass otherwise.
"""

from __future__ import annotations

from orchestrator.verdict.pattern import Decision, GateNumbers
from orchestrator.verdict.policy import DriftPolicy, RatioCIPolicy
from orchestrator.verdict.result import StatisticalDetail


def _conflict(numbers: GateNumbers, threshold: float) -> Decision:
    return Decision(
        "pass",
        "candidate copies disagree in sign (copy deltas "
        + ", ".join(f"{b.delta_pct:+.3f}%" for b in numbers.brackets)
        + "): no consistent change",
        threshold,
    )


def decide_drift_regate(numbers: GateNumbers, policy: DriftPolicy) -> Decision:
    """Apply the drift rule to a re-gate.

    Args:
        numbers: The gate's drift and delta, percent.
        policy: Uses ``tolerance_pct`` (percent).

    Returns:
        The :class:`Decision`; ``threshold_pct`` = max(tolerance, drift).
    """
    threshold = max(policy.tolerance_pct, numbers.drift_pct)
    delta = numbers.delta_pct
    if numbers.sign_conflict:
        return _conflict(numbers, threshold)
    if delta > threshold:
        return Decision(
            "regression", f"delta {delta:+.3f}% > +{threshold:.3f}% (max of tolerance, drift)",
            threshold,
        )
    if delta < -threshold:
        return Decision(
            "improvement", f"delta {delta:+.3f}% < -{threshold:.3f}% (max of tolerance, drift)",
            threshold,
        )
    return Decision(
        "pass", f"abs(delta {delta:+.3f}%) <= {threshold:.3f}% (max of tolerance, drift): "
        "timing-neutral", threshold,
    )


def decide_ratio_ci_regate(
    numbers: GateNumbers, stats: StatisticalDetail, policy: RatioCIPolicy
) -> Decision:
    """Apply the ratio-interval rule to a re-gate.

    Args:
        numbers: The gate's numbers (for the sign conflict).
        stats: The interval, percent.
        policy: Uses ``tolerance_pct`` and ``require_consistent_sign``.

    Returns:
        The :class:`Decision`; ``threshold_pct`` = tolerance.
    """
    tol = policy.tolerance_pct
    interval = f"ratio {stats.ratio_pct:+.3f}%, {stats.confidence:g} interval " \
        f"[{stats.ci_low_pct:+.3f}%, {stats.ci_high_pct:+.3f}%]"
    if policy.require_consistent_sign and numbers.sign_conflict:
        return _conflict(numbers, tol)
    if stats.ci_low_pct > 0.0 and stats.ratio_pct > tol:
        return Decision("regression", f"{interval} is above 0 and the ratio > +{tol:g}%", tol)
    if stats.ci_high_pct < 0.0 and stats.ratio_pct < -tol:
        return Decision("improvement", f"{interval} is below 0 and the ratio < -{tol:g}%", tol)
    return Decision("pass", f"{interval}: no significant change beyond {tol:g}%", tol)
