"""The semantic comparison of a gate and the decision it combines into (issue 19; pure).

Definitions (``semantic_model.py`` has the statuses and the policy):

* Steps compared: those every run printed (``series_first_step`` aligned).
* Control mean at step i: m_i = mean of the controls' values; control spread
  s_i = max - min of them, relative r_i = s_i / |m_i|. Floor of a quantity at the k-th
  compared step: F_k = max of r_j over the compared steps j up to max(k, P - 1), P the
  policy's ``floor_prefix_steps`` (a running maximum; the first P steps share one).
* Tolerance at the k-th step: T_k = max(floor_multiplier x F_k, min_rel_tol[compute
  dtype]) (issue 24 point 8: one tolerance over a long window blinded step 0).
* A candidate copy's deviation at step i: |x_i - m_i| / |m_i|; the first step (loss
  before grad_norm at the same step) whose deviation exceeds its T_k is named.
* Probe: for each tensor every run printed, SHA-256 equal to the controls', else the
  L2 norm compared like a series value (floor from the controls' L2 norms).
* Dtype coverage: the fraction of trainable elements per dtype of the registered
  parameters and of each AdamW moment; any difference is ``changed``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.verdict.model import RunSummary
from orchestrator.verdict.semantic_model import RunSemantics, SemanticPolicy, SemanticVerdict

__all__ = ["combine_decision", "judge_semantics", "per_sample_runs"]

_QUANTITIES = ("loss", "grad_norm")
_ACCEPTING = ("accept", "pass", "improvement")


def _rel(value: float, ref: float) -> float:
    if value == ref:
        return 0.0
    return abs(value - ref) / abs(ref) if ref != 0.0 else math.inf


def _profile(table: Any) -> dict[str, float | None]:
    """dtype -> fraction of elements (None when only the dtype set is known)."""
    if not isinstance(table, Mapping) or not table:
        return {}
    numels = {d: (row or {}).get("numel") if isinstance(row, Mapping) else None for d, row in table.items()}
    total = sum(v for v in numels.values() if isinstance(v, (int, float)))
    if total <= 0 or any(not isinstance(v, (int, float)) for v in numels.values()):
        return dict.fromkeys(sorted(numels))
    return {d: round(v / total, 9) for d, v in sorted(numels.items())}


def _dtype_facts(dtypes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not dtypes or ("param_dtypes" not in dtypes and "state_dtypes" not in dtypes):
        return None
    states = dtypes.get("state_dtypes") if isinstance(dtypes.get("state_dtypes"), Mapping) else {}
    facts = {"registered parameters": _profile(dtypes.get("param_dtypes"))}
    for moment in ("exp_avg", "exp_avg_sq"):
        facts[f"AdamW {moment}"] = _profile(states.get(moment))
    facts["parameters outside the optimizer"] = dtypes.get("not_in_optimizer") or 0
    return facts


def _dtype_findings(controls: list[RunSemantics], cand: RunSemantics) -> list[dict[str, Any]]:
    ref = next((f for f in (_dtype_facts(c.dtypes) for c in controls) if f is not None), None)
    mine = _dtype_facts(cand.dtypes)
    if ref is None or mine is None:
        return []
    return [{"kind": "dtype", "quantity": f"dtype coverage of {name}", "run_order": cand.order,
             "control": ref[name], "candidate": mine.get(name)}
            for name in ref if mine.get(name) != ref[name]]


def _floor(controls: list[RunSemantics], name: str, steps: list[int],
           prefix_steps: int) -> tuple[list[float], dict[int, float]]:
    """The running floor F_k per compared step (module docstring) and the control means."""
    series = [c.series(name) for c in controls]
    means, spreads = {}, []
    for step in steps:
        values = [s[step] for s in series]
        mean = math.fsum(values) / len(values)
        means[step] = mean
        spread = 0.0
        if max(values) != min(values):
            spread = (max(values) - min(values)) / abs(mean) if mean else math.inf
        spreads.append(spread)
    floors, running = [], max(spreads[:prefix_steps], default=0.0)
    for k, spread in enumerate(spreads):
        running = max(running, spread) if k >= prefix_steps else running
        floors.append(running)
    return floors, means


def _common_steps(runs: Sequence[RunSemantics], name: str) -> list[int]:
    sets = [set(r.series(name)) for r in runs]
    return sorted(set.intersection(*sets)) if sets and all(sets) else []


def _probe_tensors(run: RunSemantics) -> dict[str, Mapping[str, Any]]:
    tensors = (run.probe or {}).get("tensors") or {}
    return {k: v for k, v in tensors.items() if isinstance(v, Mapping) and v.get("present", True)}


def _probe_check(controls: list[RunSemantics], cand: RunSemantics, tol_min: float,
                 policy: SemanticPolicy) -> tuple[bool, list[dict[str, Any]], dict[str, Any]]:
    """(bitwise equal, findings, floor facts) of the probe; nothing when a side lacks it."""
    steps = {(r.probe or {}).get("step") for r in [*controls, cand]}
    all_tensors = [_probe_tensors(r) for r in [*controls, cand]]
    if len(steps) != 1 or not all(all_tensors):
        return True, [], {"probe_compared": False}
    names = sorted(set.intersection(*(set(t) for t in all_tensors)))
    ctrl_equal = cand_equal = True
    findings, floors = [], []
    for name in names:
        ctrl = [t[name] for t in all_tensors[:-1]]
        mine = all_tensors[-1][name]
        digests = {c.get("sha256") for c in ctrl}
        ctrl_equal = ctrl_equal and len(digests) == 1 and None not in digests
        if mine.get("sha256") in digests and len(digests) == 1:
            continue
        cand_equal = False
        norms = [c.get("l2_norm") for c in ctrl]
        if not all(isinstance(v, (int, float)) for v in [*norms, mine.get("l2_norm")]):
            continue
        mean = math.fsum(norms) / len(norms)
        floor = (max(norms) - min(norms)) / abs(mean) if mean else 0.0
        floors.append(floor)
        tol = max(policy.floor_multiplier * floor, tol_min)
        dev = _rel(float(mine["l2_norm"]), mean)
        if dev > tol:
            findings.append({"kind": "probe", "quantity": f"L2 norm of {name}", "run_order": cand.order,
                             "step": next(iter(steps)), "control": mean, "candidate": mine["l2_norm"],
                             "deviation_rel": dev, "tolerance_rel": tol})
    facts = {"probe_compared": bool(names), "probe_step": next(iter(steps)),
             "probe_tensors": len(names), "probe_equal_controls": ctrl_equal,
             "probe_floor_rel": max(floors, default=0.0)}
    return cand_equal, findings, facts


def _series_check(controls: list[RunSemantics], cand: RunSemantics, tol_min: float,
                  policy: SemanticPolicy, floor: dict[str, Any]) -> tuple[bool, list[dict[str, Any]], dict[str, Any]]:
    equal, firsts, copy = True, [], {"run_order": cand.order}
    for name in _QUANTITIES:
        steps = _common_steps([*controls, cand], name)
        if not steps:
            continue
        ctrl_floors, means = _floor(controls, name, steps, policy.floor_prefix_steps)
        tols = [max(policy.floor_multiplier * f, tol_min) for f in ctrl_floors]
        floor[f"{name}_rel"] = max(floor.get(f"{name}_rel", 0.0), ctrl_floors[-1])
        floor[f"{name}_first_step_rel"] = ctrl_floors[0]
        floor[f"{name}_tolerance_rel"] = tols[-1]  # the widest, at the last compared step
        floor[f"{name}_first_step_tolerance_rel"] = tols[0]
        floor["num_steps_compared"] = len(steps)
        mine = cand.series(name)
        ctrl_series = [c.series(name) for c in controls]
        equal = equal and all(mine[s] == cs[s] for s in steps for cs in ctrl_series)
        devs = [(s, _rel(mine[s], means[s]), t) for s, t in zip(steps, tols, strict=True)]
        copy[f"max_{name}_deviation_rel"] = max(d for _, d, _ in devs)
        first = next(((s, d, t) for s, d, t in devs if d > t), None)
        if first is not None:
            firsts.append({"kind": "series", "quantity": name, "run_order": cand.order, "step": first[0],
                           "control": means[first[0]], "candidate": mine[first[0]],
                           "deviation_rel": first[1], "tolerance_rel": first[2]})
    firsts.sort(key=lambda f: (f["step"], _QUANTITIES.index(f["quantity"])))
    return equal, firsts, copy


def _batch_facts(controls: list[RunSemantics], cands: list[RunSemantics]) -> dict[str, Any]:
    def side(runs: list[RunSemantics]) -> dict[str, Any]:
        return {"samples_per_step": sorted({r.samples_per_step for r in runs} - {None}),
                "tokens_per_step": sorted({r.tokens_per_step for r in runs} - {None}),
                "batch": [dict(r.batch) for r in runs[:1]]}
    return {"control": side(controls), "candidate": side(cands)}


def _batch_differs(facts: dict[str, Any]) -> str | None:
    for key in ("samples_per_step", "tokens_per_step"):
        ctrl, cand = facts["control"][key], facts["candidate"][key]
        if ctrl and cand and ctrl != cand:
            return f"{key.replace('_', ' ')} {'/'.join(map(str, ctrl))} (control) vs {'/'.join(map(str, cand))} (candidate)"
    return None


def _describe(finding: Mapping[str, Any]) -> str:
    if finding["kind"] == "dtype":
        return f"{finding['quantity']} differs: {finding['control']} (control) vs {finding['candidate']} (candidate)"
    return (f"{finding['quantity']} at step {finding['step']} differs by {finding['deviation_rel']:.3g} "
            f"(relative; tolerance {finding['tolerance_rel']:.3g}): {finding['control']:.9g} (control mean) "
            f"vs {finding['candidate']:.9g} (candidate, run {finding['run_order']})")


def judge_semantics(runs: Sequence[tuple[str, int, Mapping[str, Any] | None]], *,
                    policy: SemanticPolicy | None = None,
                    declared_changes: Sequence[str] = ()) -> SemanticVerdict:
    """Judge whether the candidate trains what the controls train.

    Args:
        runs: ``(role, order, stored semantics or None)`` per run, pattern order.
        policy: Tolerances (default :class:`SemanticPolicy`).
        declared_changes: Changes the gate declared (``batch``).

    Returns:
        The :class:`SemanticVerdict` (statuses: module docstring of ``semantic_model``).

    Raises:
        ValueError: A stored semantics object is malformed (naming the key).
    """
    policy = policy or SemanticPolicy()
    missing = [f"{role} (run {order})" for role, order, sem in runs if not sem]
    if missing:
        return SemanticVerdict("not checked", f"no semantics record from {', '.join(missing)}: the run "
                               "printed no AXBGATE_SEMANTICS / BF16_SEMANTICS (docs/record-contract.md)")
    parsed = [RunSemantics.from_stored(role, order, sem) for role, order, sem in runs]  # type: ignore[arg-type]
    controls = [r for r in parsed if r.role in ("A", "B")]
    cands = [r for r in parsed if r.role == "X"]
    if not controls or not cands:
        return SemanticVerdict("not checked", "the gate needs a control and a candidate run")
    batch = _batch_facts(controls, cands)
    batch["declared"] = "batch" in declared_changes
    ctrl_diff = _batch_differs({"control": batch["control"], "candidate": batch["control"]})
    if len(batch["control"]["samples_per_step"]) > 1:
        ctrl_diff = f"the controls disagree on samples per step {batch['control']['samples_per_step']}"
    if ctrl_diff:
        return SemanticVerdict("not comparable", ctrl_diff, batch=batch)
    differs = _batch_differs(batch)
    if differs and not batch["declared"]:
        return SemanticVerdict("not comparable", f"batch semantics differ ({differs}) and the gate did not "
                               "declare a batch change (--declare-change batch)", batch=batch,
                               findings=({"kind": "batch", "quantity": differs},))
    tol_min = policy.allowance(controls[0].compute_dtype)
    floor: dict[str, Any] = {"floor_multiplier": policy.floor_multiplier, "min_rel_tol": tol_min,
                             "floor_prefix_steps": policy.floor_prefix_steps}
    findings: list[dict[str, Any]] = []
    copies, all_equal = [], True
    for cand in cands:
        findings += _dtype_findings(controls, cand)
        if differs:  # a declared batch change trains another batch: series are not comparable
            continue
        s_equal, s_find, copy = _series_check(controls, cand, tol_min, policy, floor)
        p_equal, p_find, p_facts = _probe_check(controls, cand, tol_min, policy)
        floor.update(p_facts)
        findings += s_find + p_find
        copy["equal"] = s_equal and p_equal
        copies.append(copy)
        all_equal = all_equal and s_equal and p_equal
    floor["deterministic"] = (floor.get("loss_rel", 0.0) == 0.0 and floor.get("grad_norm_rel", 0.0) == 0.0
                              and floor.get("probe_equal_controls", True))
    verdict = dict(floor=floor, batch=batch, copies=tuple(copies), findings=tuple(findings),
                   per_sample_timing=bool(differs))
    if findings:
        return SemanticVerdict("changed", _describe(findings[0]) + (
            f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""), **verdict)
    if differs:
        return SemanticVerdict("declared change", f"batch change declared by the gate ({differs}): loss "
                               "and gradient norms are not compared, dtype coverage is the same; timing "
                               "is compared per sample", **verdict)
    if not any(k.startswith("max_") for c in copies for k in c):
        return SemanticVerdict("not checked", "the runs printed no loss or gradient-norm series to compare",
                               **verdict)
    if all_equal:
        return SemanticVerdict("equal", "loss, gradient norm and probe digests are bitwise equal to the "
                               "controls'", **verdict)
    return SemanticVerdict("within tolerance", "every loss, gradient norm and probe value lies within "
                           f"max({policy.floor_multiplier:g} x control floor up to its step, {tol_min:g}) "
                           "of the controls",
                           **verdict)


def combine_decision(timing_verdict: str | None, semantic_status: str) -> str | None:
    """The gate's decision from its timing verdict and its semantic status.

    A timing ``accept`` (or a re-gate's ``pass`` / ``improvement``) of a candidate whose
    training ``changed`` becomes ``reject (semantics)``; a gate whose batch semantics are
    ``not comparable`` has no timing decision (``not comparable``); otherwise the timing
    verdict stands. A person may record another decision, with a reason.
    """
    if semantic_status == "not comparable":
        return "not comparable"
    if semantic_status == "changed" and timing_verdict in _ACCEPTING:
        return "reject (semantics)"
    return timing_verdict


def per_sample_runs(runs: Sequence[RunSummary]) -> list[RunSummary]:
    """Candidate runs expressed at the controls' samples per step (declared batch change).

    Each candidate median (and its standard error) is scaled by control samples per step /
    candidate samples per step (local batch x accumulation x world size), and its batch
    fields set to the controls', so every policy compares time per sample and MFU and
    throughput stay those of the candidate. Runs without batch facts are returned as is.
    """
    def samples(run: RunSummary) -> int | None:
        if run.local_batch_size is None:
            return None
        return run.local_batch_size * (run.grad_accum_steps or 1) * (run.world_size or 1)

    ref = next((r for r in runs if r.is_control and samples(r)), None)
    if ref is None:
        return list(runs)
    out = []
    for run in runs:
        mine = samples(run)
        if run.is_control or not mine or mine == samples(ref):
            out.append(run)
            continue
        scale = samples(ref) / mine  # type: ignore[operator]
        out.append(dataclasses.replace(
            run, median_step_s=run.median_step_s * scale,
            median_se_s=None if run.median_se_s is None else run.median_se_s * scale,
            local_batch_size=ref.local_batch_size, grad_accum_steps=ref.grad_accum_steps,
            world_size=ref.world_size))
    return out
