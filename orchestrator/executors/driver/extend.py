"""Whether the allocation runs more of the pattern once the planned runs are done."""

from __future__ import annotations

from typing import Any

from orchestrator.executors.plan import GatePlan

__all__ = ["more_roles"]


def more_roles(plan: GatePlan, runs: list[tuple[str, dict[str, Any]]], extends: int) -> list[str]:
    """Roles to append once the planned ones ran: what the primary policy asks for
    (sequential), or ``X B`` while inconclusive within ``max_extend`` (other policies);
    decided with the same builder, parameters and history as the stored verdict."""
    from orchestrator.verdict import (
        history_from_pairs,
        judge_policies,
        plan_next_roles,
        summary_from_fields,
    )

    from orchestrator.verdict.semantics import per_sample_runs

    summaries = [summary_from_fields(role, i, f) for i, (role, f) in enumerate(runs)]
    if "batch" in plan.declared_changes:  # the same per-sample comparison as the stored verdict
        summaries = per_sample_runs(summaries)
    history = history_from_pairs(plan.control_history)
    if plan.policy == "sequential":
        return list(plan_next_roles(summaries, policy=plan.policy, params=plan.policy_params,
                                    history=history, design_seed=plan.design_seed))
    if extends >= plan.max_extend or plan.kind != "candidate":
        return []
    primary = judge_policies(summaries, kind=plan.kind, policy=plan.policy,
                             params=plan.policy_params, history=history, others=False)[0]
    return ["X", "B"] if primary.verdict == "inconclusive" else []
