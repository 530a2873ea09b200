"""The verdict of one policy as lists and pages show it (``VerdictBriefPublic``)."""

from __future__ import annotations

import math
from typing import Any

from orchestrator.domain.api_model import PublicModel

from orchestrator.verdict import plain_sentence

__all__ = ["VerdictBriefPublic"]


def _num(numbers: dict[str, Any], key: str) -> float | None:
    value = numbers.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


class VerdictBriefPublic(PublicModel):
    """One policy's timing verdict with the numbers a reader needs to trust it."""

    policy: str
    """``sequential`` (calibrated default), ``drift`` (the campaign rule) or ``ratio-ci``."""
    verdict: str
    """accept / neutral / reject / inconclusive (candidate), pass / regression / improvement
    (re-gate), or failed."""
    is_primary: bool
    """The gate's own policy (the verdict that decides); the others are shown beside it."""
    delta_pct: float | None = None
    """(candidate - control midpoint) / midpoint x 100, percent; negative is faster."""
    ci_low_pct: float | None = None
    """Lower bound of the interval of the candidate/control ratio minus 1, percent; None for
    ``drift`` or when the interval is too wide to mean anything."""
    ci_high_pct: float | None = None
    """Upper bound of that interval, percent."""
    confidence: float | None = None
    """Two-sided coverage of the interval (e.g. 0.98)."""
    mde_pct: float | None = None
    """Minimum detectable effect, percent of the control step time."""
    run_sigma_pct: float | None = None
    """Run-to-run standard deviation of log run medians x 100 (about percent)."""
    dof: int | None = None
    """Degrees of freedom of ``run_sigma_pct``."""
    threshold_pct: float | None = None
    """The margin the delta or the interval was compared with, percent."""
    drift_pct: float | None = None
    """Control drift, percent."""
    not_enough_control_pairs: bool = False
    """The interval is too wide to mean anything (MDE > 100%): shown as "not enough control
    pairs", never as percentages."""
    history_gate_ids: list[int] = []
    """Earlier gates whose control medians calibrated this verdict (linked in the UI)."""
    num_history_gates: int | None = None
    """Earlier gates used (known even when their ids were not kept)."""
    reason: str = ""
    """The policy's own one-sentence reason with the deciding numbers."""
    sentence: str = ""
    """A plain sentence for people who do not read the table."""

    @classmethod
    def from_numbers(cls, *, policy: str, verdict: str, is_primary: bool,
                     numbers: dict[str, Any]) -> VerdictBriefPublic:
        """Build the brief from a stored ``Verdict.to_dict()``."""
        wide = bool(numbers.get("not_enough_control_pairs"))
        dof = numbers.get("dof")
        ids = []
        for item in numbers.get("history_gate_ids_used") or []:
            try:
                ids.append(int(item))
            except (TypeError, ValueError):
                continue
        try:
            sentence = plain_sentence(numbers)
        except (KeyError, TypeError, ValueError):
            sentence = str(numbers.get("reason") or "")
        return cls(
            policy=policy, verdict=verdict, is_primary=is_primary,
            delta_pct=_num(numbers, "delta_pct"),
            ci_low_pct=None if wide else _num(numbers, "ci_low_pct"),
            ci_high_pct=None if wide else _num(numbers, "ci_high_pct"),
            confidence=_num(numbers, "confidence"), mde_pct=_num(numbers, "mde_pct"),
            run_sigma_pct=_num(numbers, "run_sigma_pct"),
            dof=int(dof) if isinstance(dof, int) and not isinstance(dof, bool) else None,
            threshold_pct=_num(numbers, "threshold_pct"), drift_pct=_num(numbers, "drift_pct"),
            not_enough_control_pairs=wide, history_gate_ids=ids,
            num_history_gates=numbers.get("num_history_gates")
            if isinstance(numbers.get("num_history_gates"), int) else None,
            reason=str(numbers.get("reason") or ""), sentence=sentence,
        )
