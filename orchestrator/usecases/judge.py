"""Use case: judge a finished gate and store its verdicts.

The control history a gate is judged against is taken ONCE, when the gate is
dispatched (:func:`control_history_pairs`), stored on the gate and written into its plan,
so the allocation's decision to extend and the stored verdict use the same numbers, built
by the same :func:`orchestrator.verdict.judge_policies`.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate, Run
from orchestrator.domain.gate_spec import GateOptions
from orchestrator.verdict import (
    RunSummary,
    history_from_pairs,
    judge_policies,
    mfu_numerator,
    summary_from_fields,
    verdict_kind,
)
from orchestrator.verdict.semantic_model import SemanticPolicy
from orchestrator.verdict.semantics import combine_decision, judge_semantics, per_sample_runs

__all__ = [
    "HISTORY_LIMIT",
    "control_history",
    "control_history_pairs",
    "control_identity",
    "judge_gate",
    "judge_gate_semantics",
    "run_summaries",
]

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 50
"""Most earlier gates whose control medians calibrate a gate (``ratio-ci`` takes up to
its ``max_history_gates`` of them, newest last)."""


def control_identity(gate: Gate) -> dict:
    """What makes two gates' controls the same measurement: the command or recipe with
    the control's overrides and environment, and the requested topology (nodes, GPUs,
    ranks, partition). Gates whose identities differ never share control history."""
    spec = gate.control_spec or {}
    return {"workload": gate.workload, "recipe": gate.recipe_name,
            "recipe_overrides": sorted(spec.get("recipe_overrides") or []),
            "env": dict(sorted((spec.get("env") or {}).items())),
            "topology": gate.topology_request,
            "measure": [gate.num_warmup_steps, gate.num_measured_steps,
                        (gate.options or {}).get("warmup_mode", "fixed"),
                        (gate.options or {}).get("measured_seconds")]}


def _same_control(gate: Gate, other: Gate) -> bool:
    """Whether ``other`` measured the same control identity as ``gate`` (and, when both
    allocations are known, on the same GPU model and clock bin)."""
    if control_identity(other) != control_identity(gate):
        return False
    mine, theirs = gate.allocation, other.allocation
    if mine is not None and theirs is not None:
        return (mine.gpu_model, mine.clock_bin) == (theirs.gpu_model, theirs.clock_bin)
    return True


def control_history_pairs(*, session: Session, gate: Gate,
                          limit: int = HISTORY_LIMIT) -> list[list[float]]:
    """Control run medians of earlier succeeded gates of the same control workload.

    Returns:
        Up to ``limit`` lists of >= 2 control medians (seconds), oldest first.
    """
    return control_history(session=session, gate=gate, limit=limit)[0]


def control_history(*, session: Session, gate: Gate,
                    limit: int = HISTORY_LIMIT) -> tuple[list[list[float]], list[int]]:
    """Like :func:`control_history_pairs`, with the id of the earlier gate of each entry.

    Returns:
        ``(pairs, gate_ids)``, both oldest first and of the same length.
    """
    pairs: list[list[float]] = []
    ids: list[int] = []
    for other in store.gates.earlier_succeeded_gates(session=session, gate=gate, limit=limit * 4):
        if not _same_control(gate, other):
            continue
        controls = [r for r in sorted(other.runs, key=lambda r: r.order)
                    if r.role in ("A", "B") and r.median_step_s]
        if other.policy == "sequential" and other.run_pattern.startswith("A A"):
            controls = controls[1:]  # the conditioning run (a cold GPU's first run) is no history
            left_out = _excluded_orders(other)  # outlier runs the verdict measured again
            controls = [r for r in controls if r.order not in left_out]
        medians = [r.median_step_s for r in controls]
        if len(medians) >= 2:
            pairs.append(medians)
            ids.append(other.id)
        if len(pairs) >= limit:
            break
    return list(reversed(pairs)), list(reversed(ids))


def _excluded_orders(gate: Gate) -> set[int]:
    """Orders of the runs a gate's stored primary verdict left out as outliers."""
    primary = next((v for v in gate.verdicts if v.is_primary), None)
    numbers = (primary.numbers or {}) if primary is not None else {}
    return {int(o) for o in numbers.get("excluded_orders") or []}


def run_summaries(runs: list[Run]) -> list[RunSummary]:
    """The verdict engine's view of a gate's measured runs, in pattern order (the same
    :func:`orchestrator.verdict.summary_from_fields` the allocation driver uses)."""
    fields = ("median_step_s", "slowest_rank_step_s", "num_warmup_steps", "num_measured_steps",
              "local_batch_size", "grad_accum_steps", "world_size")
    return [summary_from_fields(r.role or "X", i, {k: getattr(r, k) for k in fields})
            for i, r in enumerate(sorted(runs, key=lambda r: r.order))]


def judge_gate(*, session: Session, gate: Gate) -> list[str]:
    """Compute and store the gate's verdicts: its own policy (primary) and every other.

    Every policy is reported side by side (DESIGN.md section 3); the gate's own policy is
    the primary verdict. A gate dispatched before control histories were kept with it is
    judged against the history as it is now.

    Returns:
        The verdict names stored, primary first.
    """
    runs = sorted(gate.runs, key=lambda r: r.order)
    first = next((r for r in runs if r.flops_per_sample and r.peak_flops_per_gpu), None)
    pairs, ids = gate.control_history, gate.control_history_gate_ids
    if pairs is None:
        pairs, ids = control_history(session=session, gate=gate)
    summaries = run_summaries(runs)
    per_sample = "batch" in _declared(gate) and per_sample_runs(summaries) != summaries
    if per_sample:
        summaries = per_sample_runs(summaries)
    verdicts = judge_policies(
        summaries, kind=verdict_kind(gate.kind), policy=gate.policy,
        params=gate.policy_params, history=history_from_pairs(pairs, ids),
        mfu_numerator_pct_s=mfu_numerator(first.flops_per_sample, first.peak_flops_per_gpu)
        if first else None, design_seed=gate.design_seed,
    )
    stored = []
    for i, verdict in enumerate(verdicts):
        out = verdict.to_dict()
        if per_sample:
            out["timing_basis"] = "per sample (declared batch change)"
            out["reason"] = ("Per sample (declared batch change: candidate step times scaled to the "
                             "controls' samples per step): " + out["reason"])
        store.verdicts.save_verdict(session=session, gate_id=gate.id, policy=out["policy"],
                                    policy_version=str(out["policy_version"]), params=out["params"],
                                    verdict=out["verdict"], numbers=out, is_primary=i == 0)
        stored.append(out["verdict"])
    logger.info("gate=%s judged %s", gate.id, "/".join(stored))
    judge_gate_semantics(session=session, gate=gate, timing_verdict=stored[0] if stored else None)
    return stored


def _declared(gate: Gate) -> list[str]:
    return list(GateOptions.model_validate(gate.options or {}).declare_changes)


def _semantic_policy(gate: Gate) -> SemanticPolicy:
    """The gate's semantic policy: the default, with the floor prefix the gate (or its
    recipe) named (``GateOptions.semantic_floor_prefix_steps``)."""
    steps = GateOptions.model_validate(gate.options or {}).semantic_floor_prefix_steps
    return SemanticPolicy() if steps is None else SemanticPolicy(floor_prefix_steps=steps)


def judge_gate_semantics(*, session: Session, gate: Gate, timing_verdict: str | None) -> str:
    """Compare what the gate's runs trained and store the semantic verdict with the
    decision it combines into (``reject (semantics)``, ``not comparable`` or the timing
    verdict; ``orchestrator.verdict.semantics``).

    A malformed stored semantics object makes the semantic status ``not checked`` with
    the reason; it never fails the gate or the pass.

    Returns:
        The semantic status stored.
    """
    runs = sorted(gate.runs, key=lambda r: r.order)
    try:
        result = judge_semantics([(r.role or "X", r.order, r.semantics) for r in runs],
                                 policy=_semantic_policy(gate), declared_changes=_declared(gate))
        status, numbers = result.status, result.to_dict()
    except ValueError as exc:
        status, numbers = "not checked", {"status": "not checked",
                                          "reason": f"the runs' semantics could not be read: {exc}"}
    decision = combine_decision(timing_verdict, status)
    store.semantic_verdicts.save_semantic_verdict(session=session, gate_id=gate.id, status=status,
                                                  timing_verdict=timing_verdict, decision=decision,
                                                  numbers=numbers)
    logger.info("gate=%s semantics %s decision %s", gate.id, status, decision)
    return status
