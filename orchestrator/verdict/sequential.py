"""The ``sequential`` policy for one gate: walk its looks, decide, say what to run next.

One computation serves the stored verdict and the allocation's decision to extend:
:func:`evaluate` replays the gate's looks with ``seqcore.walk`` (the same code the
simulation benchmark runs on thousands of gates) and stops at the first decision;
``next_roles`` is read off that same result, so the driver's choice to run more and the
verdict stored afterwards cannot disagree.

| candidate gate, at a look, in this order                     | verdict                |
|--------------------------------------------------------------|------------------------|
| an outlier run was found (it is measured again)              | inconclusive, extend   |
| interval entirely below -min_effect (split guard passed)     | accept                 |
| interval entirely above +min_effect (split guard passed)     | reject                 |
| interval within +-neutral_band                               | neutral (early)        |
| budget allows another X + control pair                       | inconclusive, extend   |
| budget used up, MDE <= max_mde                               | neutral                |
| budget used up, MDE > max_mde (or > 100%)                    | inconclusive           |

Re-gate: regression when the interval lies above 0 and the estimate is above
+tolerance; improvement mirrored; pass early within +-neutral_band; at the end pass, or
inconclusive when the MDE exceeds max_mde. The arithmetic of a look is in
``seqcore.py``; docs/design.md section 3.1 has the whole method and its measured error
rates.

A gate with a ``design_seed`` (every gate the allocation ran under this policy) is
replayed against the planned pattern the seed gives, a run measured again after an
outlier included; its runs must follow that plan. A gate without one (an offline
pattern) is judged as given: the first ``num_conditioning_runs + 3`` runs must be the
conditioning control(s) and A X B, then X + control pairs in either order.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from orchestrator.verdict.calibration import HistorySelection, select_history
from orchestrator.verdict.design import (
    CANDIDATE,
    CONTROL,
    label_controls,
    planned_codes,
    roles_to_codes,
)
from orchestrator.verdict.model import ControlHistory, GateMeasurement
from orchestrator.verdict.pattern import Decision
from orchestrator.verdict.policy import SequentialPolicy
from orchestrator.verdict.result import SequentialDetail, StatisticalDetail
from orchestrator.verdict.seqcore import (
    ACCEPT,
    NEUTRAL,
    REJECT,
    VERDICT_NAMES,
    LookArrays,
    mde_pct,
    schedule,
    walk,
)

__all__ = ["SequentialOutcome", "evaluate", "history_entry", "initial_roles", "planned_pattern"]

NOT_ENOUGH_LOG = math.log(2.0)
"""An interval whose detectable effect exceeds a factor 2 (MDE > 100%) means nothing."""
_CHECK_NAMES = {0: "none", 1: "consistent", 2: "dropped", 3: "unchecked"}


@dataclass(frozen=True)
class SequentialOutcome:
    """What :func:`evaluate` found: the decision and its details."""

    decision: Decision
    """Verdict, reason and margin."""
    statistics: StatisticalDetail
    """Interval, MDE and calibration of the deciding (or last) look."""
    detail: SequentialDetail
    """Looks, boundary, history check, run order, outliers and budget."""


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def effective_conditioning(roles: tuple[str, ...], wanted: int) -> int:
    """Leading control runs left out: min(wanted, controls before the first X - 1), so at
    least one control always stays before the first candidate (``A X B`` keeps all)."""
    first_x = next(i for i, role in enumerate(roles) if role == "X")
    return max(0, min(wanted, first_x - 1))


def planned_pattern(policy: SequentialPolicy, seed: int | None) -> tuple[str, ...]:
    """The planned roles of a gate under ``policy`` with ``seed`` (``design.py``)."""
    return label_controls(planned_codes(policy.design, seed, policy.max_runs,
                                        policy.num_conditioning_runs))


def initial_roles(policy: SequentialPolicy) -> tuple[str, ...]:
    """Roles of a sequential gate's first look: conditioning control(s), then A X B.

    Args:
        policy: The sequential policy.

    Returns:
        E.g. ``("A", "A", "X", "B")`` with one conditioning run.
    """
    return ("A",) * policy.num_conditioning_runs + ("A", "X", "B")


def _given_plan(codes: tuple[int, ...], num_cond: int, max_runs: int) -> tuple[int, ...]:
    """A pattern judged as given, checked against the look grammar and extended by
    ``X C`` pairs to the budget (for the planned information fractions)."""
    head = (CONTROL,) * num_cond + (CONTROL, CANDIDATE, CONTROL)
    if codes[:len(head)] != head[:len(codes)] or len(codes) < len(head):
        raise ValueError("the sequential policy judges the conditioning control run(s), A X B, "
                         "then X + control pairs; the pattern does not start with "
                         f"{num_cond} conditioning control(s) and A X B")
    rest = codes[len(head):]
    for i in range(0, len(rest) - 1, 2):
        if sorted(rest[i:i + 2]) != [CONTROL, CANDIDATE]:
            raise ValueError("the sequential policy judges X + control pairs after A X B; "
                             f"runs {len(head) + i} and {len(head) + i + 1} are not one "
                             "candidate and one control")
    plan = list(codes)
    if len(rest) % 2:
        plan.append(CONTROL if rest[-1] == CANDIDATE else CANDIDATE)
    while len(plan) + 2 <= max_runs:
        plan.extend((CANDIDATE, CONTROL))
    return tuple(plan)


def evaluate(measurement: GateMeasurement, policy: SequentialPolicy,
             history: ControlHistory | None) -> SequentialOutcome:
    """Walk the gate's looks in order and decide at the first crossing.

    Args:
        measurement: A gate whose runs all succeeded.
        policy: The sequential policy.
        history: Control history of the same control identity, or None.

    Returns:
        The :class:`SequentialOutcome`.

    Raises:
        ValueError: The runs do not follow the planned pattern of ``design_seed``, or
            (without a seed) the look grammar.
    """
    roles = tuple(run.role for run in measurement.runs)
    codes = roles_to_codes(roles)
    seeded = measurement.design_seed is not None
    num_cond = policy.num_conditioning_runs if seeded else \
        effective_conditioning(roles, policy.num_conditioning_runs)
    if num_cond != policy.num_conditioning_runs:
        policy = dataclasses.replace(policy, num_conditioning_runs=num_cond)
    if seeded:
        plan = planned_codes(policy.design, measurement.design_seed, policy.max_runs, num_cond)
    else:
        plan = _given_plan(codes, num_cond, max(policy.max_runs, len(codes)))
    selection = select_history(history, policy.max_history_gates)
    hist_ss = np.array([selection.sum_sq]) if selection.dof > 0 else None
    logs = np.log(np.array([[run.median_step_s for run in measurement.runs]]))
    rel = np.array([[(run.median_se_s or 0.0) / run.median_step_s for run in measurement.runs]])
    width = len(codes) + policy.max_replacements + 2
    pad = width - len(codes)
    result = walk(policy, measurement.kind, np.array([plan]), np.array([len(plan)]),
                  np.pad(logs, ((0, 0), (0, pad))), np.pad(rel, ((0, 0), (0, pad))),
                  history_ss=hist_ss, history_dof=selection.dof if hist_ss is not None else 0,
                  available=np.array([len(codes)]), insert_replacements=seeded)
    walked = tuple(int(c) for c in result.roles[0, :len(codes)])
    used_upto = int(result.num_runs[0]) if result.state[0] != 1 else len(codes)
    if walked[:used_upto] != codes[:used_upto]:
        raise ValueError(
            f"runs {''.join(roles)!r} do not follow the planned pattern of design seed "
            f"{measurement.design_seed} ({''.join(label_controls(walked))!r} so far)")
    return _outcome(measurement, policy, selection, result, plan, num_cond, roles)


def _outcome(measurement, policy, selection: HistorySelection, result, plan, num_cond, roles):
    la: LookArrays = result.last
    state = {0: "decided", 1: "extend", 2: "exhausted"}[int(result.state[0])]
    kind = measurement.kind
    code = int(result.code[0])
    num_runs = int(result.num_runs[0]) if state != "extend" else len(roles)
    next_codes = result.next_roles[0] if state == "extend" else ()
    if state == "extend" and la is None:  # fewer runs than the first look needs
        return _before_first_look(measurement, policy, selection, plan, num_cond, roles,
                                  next_codes)
    g = {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in la.__dict__.items()}
    next_roles = label_controls(tuple(roles_to_codes(roles)) + tuple(next_codes))[len(roles):] \
        if next_codes else ()
    sched = schedule(tuple(plan), num_cond, selection.dof if selection.dof else 0, policy)
    k = int(result.look_index[0])
    where = _where(g, k, num_runs, len(sched.z))
    margin = policy.min_effect_pct if kind == "candidate" else policy.tolerance_pct
    runs_all = measurement.runs
    outliers = [(runs_all[p].order if p < len(runs_all) else p, t, c)
                for p, t, c in result.outlier_t[0]]
    excluded = tuple(int(p) for p, _, _ in outliers)
    if state == "decided":
        verdict = VERDICT_NAMES[kind][code]
        reason = _decided_reason(kind, code, g, policy, where)
    elif state == "extend":
        verdict = "inconclusive"
        why = (f"run {outliers[-1][0] if outliers else int(g['outlier_pos'])} is an outlier (studentised residual "
               f"{g['outlier_t']:.1f} > {g['outlier_critical']:.1f}): measure its role again"
               if g["outlier"] else "undecided")
        if g["split_blocked"]:
            why = (f"held back: the candidate/control split could be two run states lining "
                   f"up by chance (p {g['split_p'] * 100:.2f}% > {policy.split_alpha * 100:g}%)")
        reason = f"{why} at {where}; extend with {' '.join(next_roles)}"
    else:
        verdict, reason = _final(kind, g, policy,
                                 f"budget of {num_runs} runs used, look {k + 1}: {_describe(g)}")
    notes = _notes(measurement, result, g, outliers, num_cond, selection)
    stats = StatisticalDetail(
        ratio_pct=_pct(g["effect"]), ci_low_pct=_pct(g["low"]), ci_high_pct=_pct(g["high"]),
        confidence=1.0 - 2.0 * g["p"],
        mde_pct=float(mde_pct(np.array([g["mde_log"]]), kind, policy)[0]),
        mde_power=policy.mde_power, run_sigma_pct=g["sigma"] * 100.0, dof=int(g["dof"]),
        num_gate_control_pairs=int(g["gate_dof"]), num_history_pairs=int(g["history_dof"]),
        num_history_gates=len(selection.entries) if g["history_dof"] else 0,
        calibration=_calibration(g), sigma_floor_pct=g["floor"] * 100.0,
        not_enough_control_pairs=not (math.isfinite(g["mde_log"]) and
                                      g["mde_log"] <= NOT_ENOUGH_LOG),
        num_history_gates_available=selection.num_available)
    runs = measurement.runs
    offset = (runs[0].median_step_s / runs[num_cond].median_step_s - 1.0) * 100.0 \
        if num_cond else None
    check = _CHECK_NAMES[int(g["history_check"])]
    dropped = check == "dropped"
    multimodal = tuple(r.order for r in runs[num_cond:num_runs] if r.multimodal)
    detail = SequentialDetail(
        sequential_state=state, next_roles=tuple(next_roles), num_looks=int(result.num_looks[0]),
        num_looks_planned=len(sched.z), max_runs=policy.max_runs, num_runs_used=num_runs,
        num_runs_planned=len(plan) + len(excluded), planned_pattern="".join(label_controls(plan)),
        num_conditioning_runs=num_cond, first_run_offset_pct=offset,
        z_boundary=g["z"] if math.isfinite(g["z"]) else None,
        critical_value=g["critical"] if math.isfinite(g["critical"]) else None,
        alpha_spent=sched.alpha_spent[min(k, len(sched.alpha_spent) - 1)] if g["decides"] else 0.0,
        information_fraction=sched.fractions[min(k, len(sched.fractions) - 1)],
        history_check=check,
        history_check_f=None if math.isnan(g["check_f"]) else g["check_f"],
        history_check_critical=None if math.isnan(g["check_critical"]) else g["check_critical"],
        num_history_gates_dropped=len(selection.entries) if dropped else 0,
        num_history_pairs_dropped=selection.dof if dropped else 0,
        history_gate_ids_used=tuple(selection.gate_ids) if g["history_dof"] else (),
        num_multimodal_runs=len(multimodal), multimodal_orders=multimodal,
        design=policy.design, design_seed=measurement.design_seed,
        excluded_orders=excluded,
        excluded_reasons=tuple(f"run {p}: studentised residual {t:.1f} > {c:.1f}, apart "
                               "from every other run" for p, t, c in outliers),
        two_state_fit=bool(result.states_used[0]), split_guard_held=bool(result.split_blocked[0]),
        early_look=bool(sched.early[min(k, len(sched.early) - 1)]),
    )
    return SequentialOutcome(decision=Decision(verdict, reason + notes, margin),
                             statistics=stats, detail=detail)


def _before_first_look(measurement, policy, selection, plan, num_cond, roles, next_codes):
    next_roles = label_controls(tuple(roles_to_codes(roles)) + tuple(next_codes))[len(roles):]
    sched = schedule(tuple(plan), num_cond, selection.dof, policy)
    margin = policy.min_effect_pct if measurement.kind == "candidate" else policy.tolerance_pct
    nan = float("nan")
    stats = StatisticalDetail(ratio_pct=nan, ci_low_pct=nan, ci_high_pct=nan, confidence=0.0,
                              mde_pct=1e6, mde_power=policy.mde_power, run_sigma_pct=nan, dof=0,
                              num_gate_control_pairs=0, num_history_pairs=0, num_history_gates=0,
                              calibration="gate", not_enough_control_pairs=True,
                              num_history_gates_available=selection.num_available)
    detail = SequentialDetail(
        sequential_state="extend", next_roles=tuple(next_roles), num_looks=0,
        num_looks_planned=len(sched.z), max_runs=policy.max_runs, num_runs_used=len(roles),
        num_runs_planned=len(plan), planned_pattern="".join(label_controls(plan)),
        num_conditioning_runs=num_cond, first_run_offset_pct=None, z_boundary=None,
        critical_value=None, alpha_spent=0.0, information_fraction=0.0, history_check="none",
        history_check_f=None, history_check_critical=None, num_history_gates_dropped=0,
        num_history_pairs_dropped=0, history_gate_ids_used=(), num_multimodal_runs=0,
        multimodal_orders=(), design=policy.design, design_seed=measurement.design_seed)
    return SequentialOutcome(
        decision=Decision("inconclusive", f"before the first look; run {' '.join(next_roles)}",
                          margin), statistics=stats, detail=detail)


def _calibration(g: dict) -> str:
    if g["sigma"] <= g["floor"] * (1 + 1e-12) and g["gate_sigma"] < g["floor"]:
        return "floor"
    return "gate+history" if g["history_dof"] else "gate"


def _describe(g: dict) -> str:
    calib = f"sigma {g['sigma'] * 100:.3f}%, dof {int(g['dof'])}, {_calibration(g)}"
    if not (math.isfinite(g["mde_log"]) and g["mde_log"] <= NOT_ENOUGH_LOG):
        return (f"estimate {_pct(g['effect']):+.3f}%, not enough control pairs for an interval "
                f"({calib})")
    return (f"estimate {_pct(g['effect']):+.3f}%, {1 - 2 * g['p']:.4g} interval "
            f"[{_pct(g['low']):+.3f}%, {_pct(g['high']):+.3f}%] ({calib})")


def _where(g: dict, k: int, num_runs: int, num_looks: int) -> str:
    return f"look {k + 1} of {num_looks} ({num_runs} runs): {_describe(g)}"


def _decided_reason(kind: str, code: int, g: dict, policy: SequentialPolicy, where: str) -> str:
    band = policy.neutral_band_pct
    if kind == "candidate":
        m = policy.min_effect_pct
        below, above = (f"-{m:g}%", f"+{m:g}%") if m else ("0%", "0%")
        return {ACCEPT: f"candidate faster at {where}, entirely below {below}",
                REJECT: f"candidate slower at {where}, entirely above {above}",
                NEUTRAL: f"no effect beyond +-{band:g}% at {where}: do not adopt"}[code]
    tol = policy.tolerance_pct
    return {REJECT: f"timing changed at {where}, above 0 and estimate > +{tol:g}%",
            ACCEPT: f"timing changed at {where}, below 0 and estimate < -{tol:g}%",
            NEUTRAL: f"timing-neutral within +-{band:g}% at {where}"}[code]


def _final(kind: str, g: dict, policy: SequentialPolicy, where: str) -> tuple[str, str]:
    if not (math.isfinite(g["mde_log"]) and g["mde_log"] <= NOT_ENOUGH_LOG):
        return "inconclusive", (f"{where}; not enough control pairs (MDE > 100%): the "
                                "allocation is too noisy for this gate")
    mde = float(mde_pct(np.array([g["mde_log"]]), kind, policy)[0])
    if mde > policy.max_mde_pct:
        return "inconclusive", (f"{where}; minimum detectable effect {mde:.3f}% > max_mde "
                                f"{policy.max_mde_pct:g}%: too noisy to rule out an effect")
    if kind == "candidate":
        return "neutral", f"{where}; no effect of {mde:.3f}% or more: do not adopt"
    return "pass", f"{where}; no change of {mde:.3f}% or more: timing-neutral"


def _notes(measurement, result, g, outliers, num_cond, selection) -> str:
    notes = []
    if outliers:
        notes.append(f"{len(outliers)} outlier run(s) left out and measured again (orders "
                     f"{[p for p, _, _ in outliers]})")
    if result.states_used[0]:
        notes.append("the runs fall into two states (gap far above their spread): the state "
                     "is a covariate of the fit")
    if result.split_blocked[0] and result.state[0] != 1:
        notes.append("an accept/reject was held back at an earlier look: the split could have "
                     "been two run states lining up by chance")
    used = measurement.runs[num_cond:]
    multimodal = [r.order for r in used if r.multimodal]
    if multimodal:
        notes.append(f"{len(multimodal)} run(s) multimodal (orders {multimodal}): their steps "
                     "form two groups, so sigma is floored by their median errors")
    check = _CHECK_NAMES[int(g["history_check"])]
    if check == "dropped" and not math.isnan(g["check_f"]):
        side = "noisier than the gate" if g["check_f"] < 1 else "quieter than the gate"
        notes.append(f"history dropped: the gate's variance is {g['check_f']:.2f}x the "
                     f"history's (critical {g['check_critical']:.2f}: the history is {side})")
    return "".join(f"; {n}" for n in notes)


def history_entry(measurement: GateMeasurement, policy: SequentialPolicy,
                  excluded: tuple[int, ...] = ()) -> tuple[float, ...]:
    """The control medians of a finished gate that later gates may use as history.

    Args:
        measurement: A gate whose runs all succeeded.
        policy: The policy it was judged with (for its conditioning runs).
        excluded: Orders of runs the verdict left out as outliers.

    Returns:
        The control medians in pattern order without conditioning or excluded runs,
        seconds.
    """
    roles = tuple(r.role for r in measurement.runs)
    num_cond = policy.num_conditioning_runs if measurement.design_seed is not None else \
        effective_conditioning(roles, policy.num_conditioning_runs)
    return tuple(r.median_step_s for r in measurement.runs[num_cond:]
                 if r.is_control and r.order not in excluded)

