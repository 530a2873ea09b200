"""Candidate verdicts of the ``drift`` policy (DESIGN.md section 3, candidate table).

| condition                                  | verdict      |
|--------------------------------------------|--------------|
| drift > max_drift                          | inconclusive |
| candidate copies disagree in sign          | neutral      |
| delta% < -max(drift, min_effect)           | accept       |
| delta% > +max(drift, min_effect)           | reject       |
| otherwise                                  | neutral      |

Failed runs and a failed health gate are handled before any policy (``registry.judge``).
Simulated false-accept rate and power: benchmarks/results/verdict_power_*.txt.
"""

from __future__ import annotations

from orchestrator.verdict.pattern import Decision, GateNumbers
from orchestrator.verdict.policy import DriftPolicy


def decide_drift_candidate(numbers: GateNumbers, policy: DriftPolicy) -> Decision:
    """Apply the drift rule to a candidate gate.

    Args:
        numbers: The gate's midpoint, drift and delta (percent).
        policy: The drift policy's parameters (percent).

    Returns:
        The :class:`Decision`; ``threshold_pct`` = max(drift, min_effect).
    """
    drift = numbers.drift_pct
    delta = numbers.delta_pct
    threshold = max(drift, policy.min_effect_pct)
    if drift > policy.max_drift_pct:
        return Decision(
            "inconclusive",
            f"control drift {drift:.3f}% > max_drift {policy.max_drift_pct:g}%: noise too high, "
            "re-run",
            threshold,
        )
    if numbers.sign_conflict:
        return Decision(
            "neutral",
            "candidate copies disagree in sign (copy deltas "
            + ", ".join(f"{b.delta_pct:+.3f}%" for b in numbers.brackets)
            + ")",
            threshold,
        )
    if delta < -threshold:
        return Decision(
            "accept", f"delta {delta:+.3f}% is faster than -{threshold:.3f}% (max of drift, "
            "min_effect)", threshold,
        )
    if delta > threshold:
        return Decision(
            "reject", f"delta {delta:+.3f}% is slower than +{threshold:.3f}% (max of drift, "
            "min_effect)", threshold,
        )
    return Decision(
        "neutral", f"abs(delta {delta:+.3f}%) <= {threshold:.3f}% (max of drift, min_effect): "
        "do not adopt", threshold,
    )
