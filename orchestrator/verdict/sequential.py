"""The ``sequential`` policy: calibrated looks, error spending, and what to run next.

One computation serves the stored verdict and the allocation's decision to extend:
:func:`evaluate` walks the gate's looks in order and stops at the first look whose
interval crosses a boundary; :func:`next_roles` is read off that same result, so the
driver's choice to run more and the verdict stored afterwards cannot disagree.

At look k (``looks.py`` for the fit, ``calibration.py`` for sigma, ``boundaries.py``
for the boundary), with effect estimate D, se = sigma sqrt(v) and t-scale boundary c:

| candidate gate, in this order                              | verdict                |
|------------------------------------------------------------|------------------------|
| D + c se < ln(1 - min_effect)                              | accept                 |
| D - c se > ln(1 + min_effect)                              | reject                 |
| interval within +-neutral_band                             | neutral (early)        |
| budget allows another X + control pair                     | inconclusive, extend   |
| budget used up, MDE <= max_mde                             | neutral                |
| budget used up, MDE > max_mde (or > 100%)                  | inconclusive           |

Re-gate: regression when D - c se > 0 and D > ln(1 + tolerance); improvement mirrored;
pass (early) within +-neutral_band; extend; at the end pass, or inconclusive when the
MDE exceeds max_mde. MDE = (c + t_{power, dof}) se beyond min_effect (or tolerance).
Looks with fewer planned degrees of freedom than ``min_dof`` (own residual dof plus the
weighted history's, ``calibration.effective_history_dof``) spend no error; they report
their interval at the final look's nominal level and never decide. With the default
history weight (0.25 dof per own dof) the first deciding look is at 8 runs with or
without history: a history cannot be checked on the 1-2 own dof of the first looks
(docs/design.md section 3.1, "limits").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from scipy import stats as _scipy_stats

from orchestrator.verdict.boundaries import NO_BOUNDARY, spent_alpha, z_boundaries
from orchestrator.verdict.calibration import (
    HistorySelection,
    NoiseEstimate,
    effective_history_dof,
    estimate_noise,
    select_history,
    sigma_floor,
)
from orchestrator.verdict.looks import (
    design,
    design_key,
    fit_look,
    look_ends,
    num_conditioning,
    planned_roles,
)
from orchestrator.verdict.model import ControlHistory, GateMeasurement
from orchestrator.verdict.pattern import Decision
from orchestrator.verdict.policy import SequentialPolicy
from orchestrator.verdict.result import SequentialDetail, StatisticalDetail
from orchestrator.verdict.sequential_rules import (
    LookStats,
    decide_look,
    describe,
    final_decision,
    mde_pct,
    not_enough,
    pct,
)

_MAX_LOG = 700.0


@lru_cache(maxsize=8192)
def _t_isf(p: float, dof: int) -> float:
    return float(_scipy_stats.t.isf(p, dof))


@lru_cache(maxsize=8192)
def _norm_sf(z: float) -> float:
    return float(_scipy_stats.norm.sf(z))


@dataclass(frozen=True)
class Schedule:
    """Planned looks of a gate and their boundaries."""

    plan: tuple[str, ...]
    """Planned roles, conditioning runs included."""
    num_cond: int
    """Conditioning runs left out of the estimate."""
    ends: tuple[int, ...]
    """Each planned look's length in used runs."""
    z: tuple[float, ...]
    """Each look's boundary, normal scale (NO_BOUNDARY: spends no error)."""
    fractions: tuple[float, ...]
    """Each look's information fraction."""


@lru_cache(maxsize=1024)
def build_schedule(roles: tuple[str, ...], num_cond: int, history_dof: int,
                   policy: SequentialPolicy) -> Schedule:
    """Plan the looks of a gate (depends on its pattern, the budget and the history size).

    Args:
        roles: The gate's roles so far, conditioning runs included.
        num_cond: Conditioning runs.
        history_dof: Degrees of freedom of the selected history (before the check).
        policy: Budget, error and spending.

    A look spends error when its own planned residual dof plus the history dof it
    may add (``effective_history_dof``) reach ``policy.min_dof``.

    Returns:
        The :class:`Schedule`.
    """
    plan = planned_roles(roles, policy.max_runs)
    used = plan[num_cond:]
    ends = tuple(look_ends(used))
    specs = [design(design_key(used[:e])) for e in ends]
    final_v = specs[-1].var_factor
    eligible = [spec.dof + effective_history_dof(spec.dof, history_dof, policy.history_weight)
                >= policy.min_dof for spec in specs]
    fractions = tuple(min(1.0, final_v / spec.var_factor) for spec in specs)
    spend_on = tuple(f for f, ok in zip(fractions, eligible) if ok)
    bounds = iter(z_boundaries(spend_on, policy.alpha, policy.spending_gamma)
                  if spend_on else ())
    z = tuple(next(bounds) if ok else NO_BOUNDARY for ok in eligible)
    return Schedule(plan=plan, num_cond=num_cond, ends=ends, z=z, fractions=fractions)


def _look(k: int, sched: Schedule, measurement: GateMeasurement, history: HistorySelection,
          policy: SequentialPolicy) -> tuple[LookStats, NoiseEstimate]:
    used = measurement.runs[sched.num_cond : sched.num_cond + sched.ends[k]]
    fit = fit_look(used)
    noise = estimate_noise(fit.sum_sq, fit.dof, history,
                           sigma_floor(used, policy.min_sigma_pct), policy.history_check_alpha,
                           policy.history_check_low_alpha, policy.history_weight)
    decides = sched.z[k] != NO_BOUNDARY
    last_z = next((z for z in reversed(sched.z) if z != NO_BOUNDARY), NO_BOUNDARY)
    z = sched.z[k] if decides else last_z
    p = _norm_sf(z) if z != NO_BOUNDARY else policy.alpha
    c = _t_isf(p, noise.dof) if noise.dof > 0 else math.inf
    se = noise.sigma * math.sqrt(fit.var_factor)
    half = min(c * se, _MAX_LOG)
    t_pow = _t_isf(1.0 - policy.mde_power, noise.dof) if noise.dof > 0 else math.inf
    stats = LookStats(
        index=k, effect=fit.effect, se=se, critical=c, z=sched.z[k], p=p,
        low=max(fit.effect - half, -_MAX_LOG), high=min(fit.effect + half, _MAX_LOG),
        mde_log=min((c + t_pow) * se, _MAX_LOG), decides=decides and math.isfinite(c),
        num_runs=sched.num_cond + sched.ends[k],
    )
    return stats, noise


@dataclass(frozen=True)
class SequentialOutcome:
    """What :func:`evaluate` found: the decision and its details."""

    decision: Decision
    """Verdict, reason and margin."""
    statistics: StatisticalDetail
    """Interval, MDE and calibration of the deciding (or last) look."""
    detail: SequentialDetail
    """Looks, boundary, history check and budget."""


def evaluate(measurement: GateMeasurement, policy: SequentialPolicy,
             history: ControlHistory | None) -> SequentialOutcome:
    """Walk the gate's looks in order and decide at the first crossing.

    Args:
        measurement: A gate whose runs all succeeded.
        policy: The sequential policy.
        history: Control history of the same control identity, or None.

    Returns:
        The :class:`SequentialOutcome`.
    """
    roles = tuple(run.role for run in measurement.runs)
    num_cond = num_conditioning(measurement, policy.num_conditioning_runs)
    selection = select_history(history, policy.max_history_gates)
    sched = build_schedule(roles, num_cond, selection.dof, policy)
    num_done = sum(1 for e in sched.ends if e <= len(roles) - num_cond)
    decision = None
    for k in range(num_done):
        stats, noise = _look(k, sched, measurement, selection, policy)
        decision = decide_look(stats, noise, measurement.kind, policy)
        if decision is not None:
            break
    state = "decided" if decision is not None else (
        "extend" if num_done < len(sched.ends) else "exhausted")
    next_roles = sched.plan[len(roles) : len(roles) + 2] if state == "extend" else ()
    if state == "extend":
        decision = Decision(
            "inconclusive",
            f"undecided at look {stats.index + 1} of {len(sched.ends)} ({stats.num_runs} "
            f"runs): {describe(stats, noise)}; extend with {' '.join(next_roles)}",
            policy.min_effect_pct if measurement.kind == "candidate" else policy.tolerance_pct,
        )
    elif state == "exhausted":
        decision = final_decision(stats, noise, measurement.kind, policy)
    assert decision is not None
    notes = _notes(measurement, noise, num_cond)
    return SequentialOutcome(
        decision=Decision(decision.verdict, decision.reason + notes, decision.threshold_pct),
        statistics=_statistics(stats, noise, selection, measurement.kind, policy),
        detail=_detail(stats, noise, sched, measurement, selection, policy, state, next_roles),
    )


def _notes(measurement: GateMeasurement, noise: NoiseEstimate, num_cond: int) -> str:
    notes = []
    multimodal = [r.order for r in measurement.runs[num_cond:] if r.multimodal]
    if multimodal:
        notes.append(f"{len(multimodal)} run(s) multimodal (orders {multimodal}): their "
                     "steps form two groups, so sigma is floored by their median errors")
    if noise.check == "dropped" and noise.check_f is None:
        notes.append("history dropped: its control medians have no spread at all")
    elif noise.check == "dropped" and noise.check_critical is not None \
            and noise.check_f < noise.check_critical:
        notes.append(f"history dropped: the gate's variance is {noise.check_f:.2f}x the "
                     f"history's (< {noise.check_critical:.2f}, the lower F critical value: "
                     "the history is noisier than the gate)")
    elif noise.check == "dropped":
        notes.append(f"history dropped: the gate's variance is {noise.check_f:.2f}x the "
                     f"history's (> {noise.check_critical:.2f}, the F test's critical value)")
    return "".join(f"; {n}" for n in notes)


def _statistics(stats: LookStats, noise: NoiseEstimate, selection: HistorySelection,
                kind: str, policy: SequentialPolicy) -> StatisticalDetail:
    return StatisticalDetail(
        ratio_pct=pct(stats.effect),
        ci_low_pct=pct(stats.low),
        ci_high_pct=pct(stats.high),
        confidence=1.0 - 2.0 * stats.p,
        mde_pct=mde_pct(stats, kind, policy),
        mde_power=policy.mde_power,
        run_sigma_pct=noise.sigma * 100.0,
        dof=noise.dof,
        num_gate_control_pairs=noise.gate_dof,
        num_history_pairs=noise.history_dof,
        num_history_gates=noise.num_history_gates,
        calibration=noise.source,
        sigma_floor_pct=noise.floor * 100.0,
        not_enough_control_pairs=not_enough(stats),
        num_history_gates_available=selection.num_available,
    )


def _detail(stats: LookStats, noise: NoiseEstimate, sched: Schedule,
            measurement: GateMeasurement, selection: HistorySelection,
            policy: SequentialPolicy, state: str, next_roles: tuple[str, ...]) -> SequentialDetail:
    runs = measurement.runs
    num_cond = sched.num_cond
    offset = (runs[0].median_step_s / runs[num_cond].median_step_s - 1.0) * 100.0 \
        if num_cond else None
    used_ids = selection.gate_ids if noise.num_history_gates else ()
    dropped = noise.check == "dropped"
    multimodal = tuple(r.order for r in runs[num_cond:] if r.multimodal)
    return SequentialDetail(
        sequential_state=state,
        next_roles=tuple(next_roles),
        num_looks=stats.index + 1,
        num_looks_planned=len(sched.ends),
        max_runs=policy.max_runs,
        num_runs_used=stats.num_runs,
        num_runs_planned=len(sched.plan),
        planned_pattern="".join(sched.plan),
        num_conditioning_runs=num_cond,
        first_run_offset_pct=offset,
        z_boundary=stats.z if stats.z != NO_BOUNDARY else None,
        critical_value=stats.critical if math.isfinite(stats.critical) else None,
        alpha_spent=spent_alpha(sched.fractions[stats.index], policy.alpha,
                                policy.spending_gamma) if stats.decides else 0.0,
        information_fraction=sched.fractions[stats.index],
        history_check=noise.check,
        history_check_f=noise.check_f,
        history_check_critical=noise.check_critical,
        num_history_gates_dropped=len(selection.entries) if dropped else 0,
        num_history_pairs_dropped=selection.dof if dropped else 0,
        history_gate_ids_used=tuple(used_ids),
        num_multimodal_runs=len(multimodal),
        multimodal_orders=multimodal,
    )


def initial_roles(policy: SequentialPolicy) -> tuple[str, ...]:
    """Roles of a sequential gate's first look: conditioning control(s), then A X B.

    Args:
        policy: The sequential policy.

    Returns:
        E.g. ``("A", "A", "X", "B")`` with one conditioning run.
    """
    return ("A",) * policy.num_conditioning_runs + ("A", "X", "B")


def history_entry(measurement: GateMeasurement, policy: SequentialPolicy) -> tuple[float, ...]:
    """The control medians of a finished gate that later gates may use as history.

    Args:
        measurement: A gate whose runs all succeeded.
        policy: The policy it was judged with (for its conditioning runs).

    Returns:
        The control medians in pattern order without conditioning runs, seconds.
    """
    num_cond = num_conditioning(measurement, policy.num_conditioning_runs)
    return tuple(r.median_step_s for r in measurement.runs[num_cond:] if r.is_control)
