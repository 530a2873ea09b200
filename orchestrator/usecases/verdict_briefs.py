"""Use case helpers: attach every policy's verdict to ledger rows (one query per page), and
say in words how the policies of one gate disagree (:func:`disagreement_text`, pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.schemas.verdicts import VerdictBriefPublic
from orchestrator.schemas.views import GateSummaryPublic

__all__ = ["attach_verdicts", "disagreement_text"]


def attach_verdicts(*, session: Session, summaries: Iterable[GateSummaryPublic]) -> None:
    """Fill ``verdicts`` (primary first) and ``policies_disagree`` of each summary in place.

    Args:
        session: Open session.
        summaries: Rows of one page; their verdicts are loaded with one query.
    """
    rows = list(summaries)
    found = store.verdicts.verdicts_of_gates(session=session, gate_ids=[s.id for s in rows])
    for summary in rows:
        briefs = [VerdictBriefPublic.from_numbers(policy=p, verdict=v, is_primary=primary,
                                                  numbers=numbers)
                  for p, v, primary, numbers in found.get(summary.id, [])]
        summary.verdicts = briefs
        primary = next((b for b in briefs if b.is_primary), None)
        summary.policies_disagree = primary is not None and any(
            b.verdict != primary.verdict for b in briefs if not b.is_primary)


_NO_EFFECT_RATE = {"accept": "accepts", "reject": "rejects"}


def _numbers_of(verdict: Any) -> dict[str, Any]:
    """The numbers of a ``VerdictPublic`` (``numbers``) or a ``VerdictBriefPublic`` (its own
    fields carry the same names), or of a plain dict."""
    if isinstance(verdict, Mapping):
        return dict(verdict.get("numbers") or verdict)
    numbers = getattr(verdict, "numbers", None)
    if isinstance(numbers, Mapping):
        return dict(numbers)
    return verdict.model_dump() if hasattr(verdict, "model_dump") else {}


def _attr(verdict: Any, key: str) -> Any:
    return verdict.get(key) if isinstance(verdict, Mapping) else getattr(verdict, key, None)


def _finite(numbers: Mapping[str, Any], key: str) -> float | None:
    value = numbers.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _said(policy: str, verdict: str, numbers: Mapping[str, Any]) -> str:
    """``drift said inconclusive (control drift 16.03 % above its 2 % limit)`` and the like."""
    delta = _finite(numbers, "delta_pct")
    low, high = _finite(numbers, "ci_low_pct"), _finite(numbers, "ci_high_pct")
    threshold, drift = _finite(numbers, "threshold_pct"), _finite(numbers, "drift_pct")
    facts = []
    if delta is not None:
        facts.append(f"delta {delta:+.2f} %")
    if policy != "drift" and low is not None and high is not None \
            and not numbers.get("not_enough_control_pairs"):
        facts.append(f"interval [{low:+.2f}, {high:+.2f}] %")
        if threshold:
            facts.append(f"threshold +/-{threshold:.2f} %")
    elif policy != "drift" and numbers.get("not_enough_control_pairs"):
        facts.append("not enough control pairs for an interval")
    elif policy == "drift" and drift is not None:
        limit = (numbers.get("params") or {}).get("max_drift_pct")
        if verdict == "inconclusive" and isinstance(limit, (int, float)) and drift > limit:
            facts.append(f"control drift {drift:.2f} % above its {limit:g} % limit")
        elif verdict == "inconclusive":
            facts.append(f"control drift {drift:.2f} %")
        else:
            facts.append(f"band +/-{max(threshold or 0.0, drift):.2f} % set by the control drift")
    return f"{policy} said {verdict}" + (f" ({', '.join(facts)})" if facts else "")


def disagreement_text(verdicts: Sequence[Any]) -> str:
    """Say how the policies of one gate disagree, from their actual verdicts and numbers.

    Args:
        verdicts: The gate's verdicts: ``VerdictPublic`` (with ``numbers``),
            ``VerdictBriefPublic`` or dicts with ``policy``, ``verdict``, ``is_primary`` and
            the numbers (``delta_pct``, ``ci_low_pct``, ``ci_high_pct``, ``threshold_pct``,
            ``drift_pct``, ...).

    Returns:
        ``""`` when every policy reached the same verdict (or there is at most one); else
        e.g. ``Policies disagree on the same runs: sequential (primary) said accept (delta
        -3.10 %, interval [-4.02, -2.18] %, threshold +/-0.50 %); drift said inconclusive
        (delta -3.10 %, control drift 16.03 % above its 2 % limit). The primary policy
        (sequential) decides: accept. ...`` with a caution that names what the other
        policy's verdict means. The no-effect accept/reject rate of the drift rule (about
        20% each on one A X B, DESIGN.md section 3) is cited only when drift itself
        accepted or rejected.
    """
    items = [(str(_attr(v, "policy")), str(_attr(v, "verdict")), bool(_attr(v, "is_primary")),
              _numbers_of(v)) for v in verdicts]
    if len({verdict for _, verdict, _, _ in items}) < 2:
        return ""
    items.sort(key=lambda item: not item[2])
    primary = next((item for item in items if item[2]), items[0])
    said = "; ".join(_said(p, v, n).replace(f"{p} said", f"{p} (primary) said", 1) if is_primary
                     else _said(p, v, n) for p, v, is_primary, n in items)
    out = [f"Policies disagree on the same runs: {said}.",
           f"The primary policy ({primary[0]}) decides: {primary[1]}."]
    decisive = ("accept", "reject", "improvement", "regression")
    for policy, verdict, is_primary, numbers in items:
        if is_primary or verdict == primary[1]:
            continue
        if policy == "drift" and verdict in _NO_EFFECT_RATE:
            copies = numbers.get("num_candidate_copies")
            single = " on a single A X B" if copies in (None, 1) else ""
            out.append(f"drift's {verdict} compares one candidate with the controls' own range: "
                       f"with no true effect it {_NO_EFFECT_RATE[verdict]} about 20% of "
                       f"candidates{single}, so it is not evidence on its own.")
        elif verdict == "inconclusive" and primary[1] in decisive:
            drift = _finite(numbers, "drift_pct")
            if policy == "drift":
                moved = f" (they moved by {drift:.2f} %)" if drift is not None else ""
                out.append(f"drift found the controls too far apart to decide{moved}: look at "
                           "the runs (two clock states, one slow outlier) before adopting.")
            else:
                out.append(f"{policy} could not decide from these runs (its interval needs "
                           "more control pairs): measure more runs before adopting.")
        elif verdict in decisive and primary[1] not in decisive:
            out.append(f"{policy} saw an effect that the primary policy does not find beyond "
                       "its noise: measure more runs before adopting.")
    return " ".join(out)
