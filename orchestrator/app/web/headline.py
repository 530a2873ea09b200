"""The gate page's headline: the card a person reads in five seconds and the numbers of the
delta plot (each candidate copy against the control midpoint of its neighbours, with the
policy's decision band).

Pure functions of the read models (:class:`orchestrator.schemas.views.GateViewPublic`); the
numbers are the stored primary verdict's, never recomputed with other rules.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from orchestrator.schemas.views import GateViewPublic
from orchestrator.usecases.run_plan import run_budget

__all__ = ["CopyDelta", "DecisionBand", "Headline", "copy_deltas", "decision_band",
           "effect_text", "gate_headline"]


@dataclasses.dataclass(frozen=True)
class CopyDelta:
    """One candidate copy (X run) against the midpoint of its two neighbouring controls."""

    candidate_order: int
    """Pattern position of the copy (the run's order)."""
    left_order: int
    """Pattern position of the control before it."""
    right_order: int
    """Pattern position of the control after it."""
    delta_pct: float
    """(copy - midpoint of its neighbours) / midpoint x 100, percent (negative: faster)."""
    low_pct: float
    """The copy against the faster of its two neighbours, percent (lower end of its interval)."""
    high_pct: float
    """The copy against the slower of its two neighbours, percent (upper end)."""


@dataclasses.dataclass(frozen=True)
class DecisionBand:
    """The region of deltas in which the primary policy neither accepts nor rejects."""

    low_pct: float
    """Lower edge, percent (< 0)."""
    high_pct: float
    """Upper edge, percent (> 0)."""
    accept_below_pct: float
    """The policy accepts when the delta (drift) or the whole interval lies below this."""
    reject_above_pct: float
    """The policy rejects when the delta (drift) or the whole interval lies above this."""
    label: str
    """One sentence saying what the band is, with the policy's parameter names."""


@dataclasses.dataclass(frozen=True)
class Headline:
    """The numbers of the gate card."""

    decision: str | None
    """Effective decision (recorded, else the primary timing verdict with the semantics)."""
    verdict: str | None
    """Primary timing verdict."""
    policy: str | None
    """Primary policy."""
    effect: str
    """E.g. ``X is 2.950 % faster [-3.171, -2.729] % vs control midpoint``."""
    interval_source: str
    """What the interval is (the policy's confidence interval or the neighbour range)."""
    num_runs_done: int
    """Runs that succeeded."""
    num_runs_planned: int
    """Runs the gate holds now (its pattern, with extensions)."""
    num_runs_max: int
    """Runs the gate may take at most (``run_plan.run_budget``)."""
    gpu_seconds: float | None
    """Sum over runs of (ended - started) x GPUs of the allocation, seconds; None when no
    run has both times or the GPU count is unknown."""
    num_gpus: int | None
    """GPUs of the allocation (or the requested topology)."""
    health: str | None
    """Allocation health verdict: ``healthy``, ``degraded`` or ``failed``."""
    semantics: str | None
    """Semantic verdict status, or None before the gate was judged."""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def copy_deltas(numbers: dict[str, Any]) -> list[CopyDelta]:
    """The per-copy deltas of a stored verdict's ``brackets`` (pattern order).

    Args:
        numbers: A verdict's stored numbers (``Verdict.to_dict()``).

    Returns:
        One entry per candidate copy; empty when the verdict has no brackets (failed).
    """
    out = []
    for b in numbers.get("brackets") or []:
        cand, left, right = b.get("candidate_s"), b.get("left_s"), b.get("right_s")
        if not (_finite(cand) and _finite(left) and _finite(right) and left > 0 and right > 0):
            continue
        against = sorted((cand / c - 1.0) * 100.0 for c in (left, right))
        out.append(CopyDelta(candidate_order=int(b["candidate_order"]),
                             left_order=int(b["left_order"]), right_order=int(b["right_order"]),
                             delta_pct=float(b["delta_pct"]), low_pct=against[0],
                             high_pct=against[1]))
    return out


def decision_band(policy: str | None, numbers: dict[str, Any]) -> DecisionBand:
    """The primary policy's decision band around zero delta (always of non-zero width).

    ``drift``: |delta| against max(drift, min_effect) (``threshold_pct``). ``sequential``:
    accept/reject when the interval clears +-``min_effect_pct``; an interval inside
    +-``neutral_band_pct`` is neutral, so the band is +-max(neutral band, min effect).
    ``ratio-ci``: accept/reject at +-``min_effect_pct``; effects below the MDE are not
    resolved, so the band is +-max(min effect, MDE). A zero result falls back to the
    policy's ``tolerance_pct`` (then 0.5 %), so the band is never drawn with zero width.

    Args:
        policy: The primary policy's name.
        numbers: Its stored numbers (``params`` inside).
    """
    params = numbers.get("params") or {}
    min_effect = float(params.get("min_effect_pct") or 0.0)
    if policy == "drift":
        half = float(numbers.get("threshold_pct") or 0.0)
        label = (f"drift: accept below -{half:.3f} %, reject above +{half:.3f} % "
                 "(max of the control drift and min_effect)")
        margin = half
    elif policy == "sequential":
        neutral = float(params.get("neutral_band_pct") or 0.0)
        half = max(neutral, min_effect)
        label = (f"sequential: neutral when the interval lies within \u00b1{neutral:g} % "
                 f"(neutral_band_pct); accept/reject when it clears \u00b1{min_effect:g} % (min_effect_pct)")
        margin = min_effect
    else:
        mde = numbers.get("mde_pct")
        half = max(min_effect, float(mde) if _finite(mde) else 0.0)
        label = (f"{policy or 'policy'}: accept/reject when the interval clears \u00b1{min_effect:g} % "
                 f"(min_effect_pct); effects below the MDE {half:.3f} % are not resolved")
        margin = min_effect
    if not (half > 0):
        half = float(params.get("tolerance_pct") or 0.5) or 0.5
        label += f" (band: \u00b1{half:g} % tolerance_pct)"
    return DecisionBand(low_pct=-half, high_pct=half, accept_below_pct=-margin,
                        reject_above_pct=margin, label=label)


def effect_text(delta_pct: float | None, low_pct: float | None, high_pct: float | None) -> str:
    """``X is 2.950 % faster [-3.171, -2.729] % vs control midpoint`` (signed interval).

    Args:
        delta_pct: Candidate vs control midpoint, percent (positive: slower).
        low_pct: Lower end of the interval, percent, or None.
        high_pct: Upper end, percent, or None.
    """
    if not _finite(delta_pct):
        return "no effect measured yet"
    word = "slower" if delta_pct > 0 else "faster"
    text = f"X is {abs(delta_pct):.3f} % {word}"
    if abs(delta_pct) < 5e-4:
        text = "X is as fast as the controls"
    if _finite(low_pct) and _finite(high_pct):
        text += f" [{low_pct:+.3f}, {high_pct:+.3f}] %"
    return text + " vs control midpoint"


def _primary(view: GateViewPublic):
    return next((v for v in view.gate.verdicts if v.is_primary), None)


def _num_gpus(view: GateViewPublic) -> int | None:
    if view.allocation is not None and view.allocation.num_gpus:
        return int(view.allocation.num_gpus)
    topo = view.gate.topology_request or {}
    if topo.get("gpus_per_node"):
        return int(topo.get("nodes", 1)) * int(topo["gpus_per_node"])
    return None


def gate_headline(view: GateViewPublic) -> Headline:
    """The gate card's numbers from one gate's view.

    Runs: done = succeeded runs; planned = runs the gate has (pattern plus extensions);
    maximum = the sequential gate's planned pattern at its budget, else its ``max_runs``
    parameter, else the planned runs. GPU-seconds: sum over runs of (ended - started) x GPUs.
    """
    s = view.summary
    primary = _primary(view)
    numbers = dict(primary.numbers or {}) if primary is not None else {}
    brief = next((b for b in s.verdicts if b.is_primary), None)
    low = high = None
    source = ""
    if brief is not None and _finite(brief.ci_low_pct) and _finite(brief.ci_high_pct):
        low, high = brief.ci_low_pct, brief.ci_high_pct
        conf = f"{brief.confidence:.4g} " if _finite(brief.confidence) else ""
        source = f"{conf}interval of the {brief.policy} policy"
    else:
        copies = copy_deltas(numbers)
        if copies:
            low, high = min(c.low_pct for c in copies), max(c.high_pct for c in copies)
            source = "range of the candidate copies against either neighbouring control"
    done = sum(1 for r in view.runs if r.status == "succeeded")
    g = view.gate
    budget = run_budget(policy=g.policy, policy_params=g.policy_params, kind=g.kind,
                        run_pattern=g.run_pattern, num_runs=len(view.runs),
                        max_extend=int((g.options or {}).get("max_extend") or 0))
    gpus = _num_gpus(view)
    run_s = [(r.ended_at - r.started_at).total_seconds() for r in view.runs
             if r.started_at is not None and r.ended_at is not None]
    gpu_seconds = sum(run_s) * gpus if run_s and gpus else None
    health = view.allocation.health_verdict if view.allocation is not None else s.health_verdict
    return Headline(decision=s.decision, verdict=s.verdict, policy=s.policy,
                    effect=effect_text(s.delta_pct, low, high), interval_source=source,
                    num_runs_done=done, num_runs_planned=budget.num_runs_planned,
                    num_runs_max=budget.max_runs,
                    gpu_seconds=gpu_seconds, num_gpus=gpus, health=health,
                    semantics=s.semantics)
