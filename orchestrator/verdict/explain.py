"""One plain sentence for a timing verdict, for people who do not read the table (pure).

The sentence says what decided: the drift rule compares the delta with the controls' own
drift (and gives no verdict when that drift exceeds ``max_drift``, DESIGN.md section 3);
the interval policies (``sequential``, ``ratio-ci``) compare the effect's interval, built
from run-to-run noise, with their threshold. A large control drift is never given as the
reason for an accept.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["plain_sentence"]

_DRIFT_LIMIT_PCT = 2.0
"""The drift rule's default ``max_drift`` (DESIGN.md section 3): a control spread above it is
named in the sentence of an interval policy."""

_OUTCOME = {
    "accept": "so axbgate accepts the candidate",
    "reject": "so axbgate rejects the candidate (a regression)",
    "neutral": "so it is not adopted (within the noise this allocation showed)",
    "inconclusive": "so this gate cannot decide; run it again or with more runs",
    "pass": "so the commit is timing-neutral (pass)",
    "regression": "so the commit made timing worse (regression)",
    "improvement": "so the commit made timing better (improvement)",
}


def _finite(numbers: dict[str, Any], key: str) -> float | None:
    value = numbers.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _controls(numbers: dict[str, Any]) -> str:
    """``the two controls differed by 0.31%`` (A X B) or ``the controls ranged over 16.0%``."""
    drift = _finite(numbers, "drift_pct")
    if drift is None:
        return ""
    num_controls = str(numbers.get("pattern") or "").count("A") + str(numbers.get("pattern") or "").count("B")
    if num_controls > 2:
        return f"the controls ranged over {drift:.2f}% (slowest minus fastest)"
    return f"the two controls differed by {drift:.2f}%"


def _drift_sentence(numbers: dict[str, Any], verdict: str, head: str) -> str:
    controls = _controls(numbers)
    limit = (numbers.get("params") or {}).get("max_drift_pct")
    if verdict == "inconclusive":
        over = f", more than the {limit:g}% the drift rule allows" if isinstance(limit, (int, float)) else ""
        return f"{head}; {controls}{over}: too noisy to tell, so this gate cannot decide; run it again."
    threshold = _finite(numbers, "threshold_pct")
    band = f" (the delta must exceed {threshold:.2f}%)" if threshold is not None else ""
    return f"{head}; {controls}{band}, {_OUTCOME.get(verdict, f'verdict {verdict}')}."


def _interval_sentence(numbers: dict[str, Any], verdict: str, head: str, low: float,
                       high: float) -> str:
    confidence = _finite(numbers, "confidence")
    level = f"{confidence * 100:.3g}% " if confidence else ""
    sigma = _finite(numbers, "run_sigma_pct")
    noise = f" given run-to-run noise of {sigma:.2f}% (sigma)" if sigma is not None else ""
    threshold = _finite(numbers, "threshold_pct") or 0.0
    if threshold <= 0:
        where = "lies below 0%" if high < 0 else "lies above 0%" if low > 0 else "includes 0%"
    elif high < -threshold:
        where = f"lies entirely below -{threshold:.2f}%"
    elif low > threshold:
        where = f"lies entirely above +{threshold:.2f}%"
    else:
        where = f"overlaps the band of +/-{threshold:.2f}%"
    text = (f"{head}; its {level}interval [{low:+.2f}%, {high:+.2f}%]{noise} {where}, "
            f"{_OUTCOME.get(verdict, f'verdict {verdict}')}")
    controls = _controls(numbers)
    drift = _finite(numbers, "drift_pct")
    if controls and drift is not None and drift > max(threshold, _DRIFT_LIMIT_PCT):
        offset = _finite(numbers, "first_run_offset_pct")
        cond = (f"; the conditioning run, left out of the estimate, was {offset:+.2f}% off the "
                "next control" if offset is not None and abs(offset) > _DRIFT_LIMIT_PCT else "")
        text += (f" ({controls}{cond}; the drift rule would not decide at that spread: look at "
                 "the runs before adopting)")
    return text + "."


def plain_sentence(numbers: dict[str, Any]) -> str:
    """Explain a verdict (``Verdict.to_dict()``) in one sentence.

    Returns:
        E.g. "The candidate's median step was 24.1% shorter than the controls' midpoint
        (0.2843 s); the two controls differed by 0.31% (the delta must exceed 0.31%), so
        axbgate accepts the candidate." (drift rule), or, for an interval policy, the
        interval and where it lies. For a ``failed`` gate, its reason.
    """
    verdict = str(numbers.get("verdict"))
    delta = _finite(numbers, "delta_pct")
    if verdict == "failed" or delta is None:
        return f"No verdict: {numbers.get('reason') or 'the gate did not measure'}."
    direction = "shorter" if delta < 0 else "longer"
    midpoint = _finite(numbers, "midpoint_s")
    at = f" ({midpoint:.4g} s)" if midpoint is not None else ""
    head = f"The candidate's median step was {abs(delta):.1f}% {direction} than the controls' midpoint{at}"
    low, high = _finite(numbers, "ci_low_pct"), _finite(numbers, "ci_high_pct")
    if numbers.get("policy") != "drift" and low is not None and high is not None \
            and not numbers.get("not_enough_control_pairs"):
        return _interval_sentence(numbers, verdict, head, low, high)
    if numbers.get("not_enough_control_pairs"):
        return (f"{head}; there are not enough control pairs for an interval, "
                f"{_OUTCOME.get(verdict, f'verdict {verdict}')}.")
    return _drift_sentence(numbers, verdict, head)
