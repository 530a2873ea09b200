"""One plain sentence for a timing verdict, for people who do not read the table (pure)."""

from __future__ import annotations

from typing import Any

__all__ = ["plain_sentence"]

_OUTCOME = {
    "accept": "so axbgate accepts the candidate",
    "reject": "so axbgate rejects the candidate (a regression)",
    "neutral": "so it is not adopted (within the noise this allocation showed)",
    "inconclusive": "so this gate cannot decide; run it again or with more runs",
    "pass": "so the commit is timing-neutral (pass)",
    "regression": "so the commit made timing worse (regression)",
    "improvement": "so the commit made timing better (improvement)",
}


def plain_sentence(numbers: dict[str, Any]) -> str:
    """Explain a verdict (``Verdict.to_dict()``) in one sentence.

    Returns:
        E.g. "The candidate's median step was 24.1% shorter than the controls' midpoint
        (0.2843 s); the two controls differed by 0.31%, so axbgate accepts the candidate."
        For a ``failed`` gate, its reason.
    """
    verdict = numbers.get("verdict")
    if verdict == "failed" or numbers.get("delta_pct") is None:
        return f"No verdict: {numbers.get('reason') or 'the gate did not measure'}."
    delta = float(numbers["delta_pct"])
    direction = "shorter" if delta < 0 else "longer"
    return (f"The candidate's median step was {abs(delta):.1f}% {direction} than the controls' "
            f"midpoint ({numbers['midpoint_s']:.4g} s); the two controls differed by "
            f"{numbers['drift_pct']:.2f}%, {_OUTCOME.get(str(verdict), f'verdict {verdict}')}.")
