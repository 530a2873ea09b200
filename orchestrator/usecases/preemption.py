"""Use case: resubmit a gate whose allocation Slurm preempted, once, as a NEW gate.

The preempted gate fails (its reason names the new gate); the new gate gets its own
allocation, runs and verdict, so runs of two allocations are never judged together.
Asked for per gate with ``topology.resubmit_on_preemption``; the copy has it off, so a
gate is resubmitted at most once.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate

__all__ = ["resubmit_preempted"]

logger = logging.getLogger(__name__)

_COPIED = ("kind", "family", "tags", "control_spec", "candidate_spec", "workload", "recipe",
           "recipe_name", "run_pattern", "num_warmup_steps", "num_measured_steps", "policy",
           "policy_params", "options", "control_history", "executor", "repository_id",
           "design_seed")


def resubmit_preempted(*, session: Session, gate: Gate) -> Gate | None:
    """Queue a copy of ``gate`` (same request, fresh runs) if it asked for one.

    Args:
        session: Open session (the caller commits).
        gate: A gate whose allocation was preempted.

    Returns:
        The new queued gate, or None when ``topology.resubmit_on_preemption`` is off.
    """
    topology = dict(gate.topology_request or {})
    if not topology.get("resubmit_on_preemption"):
        return None
    topology["resubmit_on_preemption"] = False  # once
    title = f"{gate.title} (resubmitted after gate {gate.id} was preempted)"[:255]
    new = store.gates.create_gate(session=session, title=title, topology_request=topology,
                                  **{k: getattr(gate, k) for k in _COPIED})
    pattern = gate.run_pattern.split()
    for run in sorted(gate.runs, key=lambda r: r.order):
        if run.order < len(pattern):  # the planned pattern, not runs the driver appended
            store.runs.create_run(session=session, gate_id=new.id, role=run.role, order=run.order,
                                  status="pending", source_ref=run.source_ref, source_sha=run.source_sha,
                                  source_dirty=run.source_dirty, env=run.env)
    session.flush()
    logger.info("gate=%s preempted: resubmitted as gate %s", gate.id, new.id)
    return new
