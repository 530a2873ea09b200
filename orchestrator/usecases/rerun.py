"""Use case helper: the ``rerun`` decision queues a new gate with the same request.

The copy keeps what was measured (sources as resolved, environment, recipe, pattern,
steps, policy, options, executor, topology) and starts ``queued`` with one pending run
per role; its control history is taken afresh when it is dispatched.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from orchestrator import store
from orchestrator.db.models import Gate
from orchestrator.domain.gate_spec import parse_pattern

__all__ = ["requeue_gate"]

logger = logging.getLogger(__name__)

_COPIED = ("kind", "title", "family", "tags", "control_spec", "candidate_spec", "workload",
           "recipe", "recipe_name", "topology_request", "run_pattern", "num_warmup_steps",
           "num_measured_steps", "policy", "policy_params", "options", "executor",
           "request_sha256", "parent_gate_id", "repository_id")


def requeue_gate(*, session: Session, gate: Gate) -> Gate:
    """Queue a new gate asking for exactly what ``gate`` asked for (flushes, no commit).

    Args:
        session: Open session (the caller commits).
        gate: The finished gate a person decided to re-run.

    Returns:
        The new ``queued`` gate with its pending runs.
    """
    fields = {name: getattr(gate, name) for name in _COPIED}
    fields["tags"] = list(gate.tags or [])
    if gate.design_seed is not None:  # a re-run is a new randomisation of the same request
        import secrets

        fields["design_seed"] = secrets.randbelow(2**31)
    new = store.gates.create_gate(session=session, **fields)
    for order, role in enumerate(parse_pattern(gate.run_pattern)):
        spec = gate.candidate_spec if role == "X" else gate.control_spec
        source = (spec or {}).get("source") or {}
        store.runs.create_run(session=session, gate_id=new.id, role=role, order=order,
                              status="pending", source_ref=source.get("ref"),
                              source_sha=source.get("sha"),
                              source_dirty=bool(source.get("dirty", False)),
                              env=(spec or {}).get("env") or {})
    session.flush()
    logger.info("gate=%s re-run queued as gate=%s", gate.id, new.id)
    return new
