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
from orchestrator.verdict import (
    RunSummary,
    history_from_pairs,
    judge_policies,
    mfu_numerator,
    verdict_kind,
)

__all__ = ["HISTORY_LIMIT", "control_history_pairs", "judge_gate", "run_summaries"]

logger = logging.getLogger(__name__)

HISTORY_LIMIT = 50
"""Most earlier gates whose control medians calibrate a gate (``ratio-ci`` takes up to
its ``max_history_gates`` of them, newest last)."""


def _same_control(gate: Gate, other: Gate) -> bool:
    """Whether ``other`` measured the same control workload as ``gate``."""
    return (other.topology_request == gate.topology_request and other.workload == gate.workload
            and other.recipe_name == gate.recipe_name)


def control_history_pairs(*, session: Session, gate: Gate,
                          limit: int = HISTORY_LIMIT) -> list[list[float]]:
    """Control run medians of earlier succeeded gates of the same control workload.

    Returns:
        Up to ``limit`` lists of >= 2 control medians (seconds), oldest first.
    """
    pairs: list[list[float]] = []
    for other in store.gates.earlier_succeeded_gates(session=session, gate=gate, limit=limit * 4):
        if not _same_control(gate, other):
            continue
        medians = [r.median_step_s for r in other.runs if r.role in ("A", "B") and r.median_step_s]
        if len(medians) >= 2:
            pairs.append(medians)
        if len(pairs) >= limit:
            break
    return list(reversed(pairs))


def run_summaries(runs: list[Run]) -> list[RunSummary]:
    """The verdict engine's view of a gate's measured runs, in pattern order."""
    return [RunSummary(role=r.role, order=i, median_step_s=r.median_step_s,  # type: ignore[arg-type]
                       local_batch_size=r.local_batch_size, grad_accum_steps=r.grad_accum_steps,
                       world_size=r.world_size)
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
    pairs = gate.control_history
    if pairs is None:
        pairs = control_history_pairs(session=session, gate=gate)
    verdicts = judge_policies(
        run_summaries(runs), kind=verdict_kind(gate.kind), policy=gate.policy,
        params=gate.policy_params, history=history_from_pairs(pairs),
        mfu_numerator_pct_s=mfu_numerator(first.flops_per_sample, first.peak_flops_per_gpu)
        if first else None,
    )
    stored = []
    for i, verdict in enumerate(verdicts):
        out = verdict.to_dict()
        store.verdicts.save_verdict(session=session, gate_id=gate.id, policy=out["policy"],
                                    policy_version=str(out["policy_version"]), params=out["params"],
                                    verdict=out["verdict"], numbers=out, is_primary=i == 0)
        stored.append(out["verdict"])
    logger.info("gate=%s judged %s", gate.id, "/".join(stored))
    return stored
