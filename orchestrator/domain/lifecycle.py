"""Gate and run states as a table of allowed transitions.

Every state change goes through :func:`transition` (the shape of Prefect's orchestration
rules): a change the table does not allow raises :class:`InvalidTransition`, so a late
poll can never move a cancelled gate back to running.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Protocol

from orchestrator.domain.errors import InvalidTransition

__all__ = [
    "GATE_TRANSITIONS",
    "GateStatus",
    "RUN_TRANSITIONS",
    "RunStatus",
    "TERMINAL_GATE_STATUSES",
    "transition",
]


class GateStatus(str, enum.Enum):
    """Lifecycle of a gate."""

    QUEUED = "queued"
    SUBMITTED = "submitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunStatus(str, enum.Enum):
    """Lifecycle of a run inside a gate."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


TERMINAL_GATE_STATUSES = frozenset(
    {GateStatus.SUCCEEDED.value, GateStatus.FAILED.value, GateStatus.CANCELLED.value}
)

GATE_TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"submitted", "failed", "cancelled"}),
    # submitted -> queued: a claim whose dispatcher died before it wrote the plan (nothing ran)
    "submitted": frozenset({"queued", "running", "succeeded", "failed", "cancelled"}),
    "running": frozenset({"succeeded", "failed", "cancelled"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "succeeded", "failed", "cancelled", "skipped"}),
    "running": frozenset({"succeeded", "failed", "cancelled"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
    "skipped": frozenset(),
}


class _Stateful(Protocol):
    id: int
    status: str


def transition(obj: _Stateful, to_state: str, *, reason: str | None = None) -> bool:
    """Move a gate or run to ``to_state`` if the table allows it.

    A transition to the current state is a no-op (idempotent passes of the poller).
    Gates get ``submitted_at`` / ``started_at`` / ``ended_at`` stamped and
    ``status_reason`` set; runs get ``started_at`` / ``ended_at`` and ``error``.

    Args:
        obj: A :class:`~orchestrator.db.models.Gate` or :class:`~orchestrator.db.models.Run`.
        to_state: Target state name.
        reason: Why (stored on failure/cancel).

    Returns:
        ``True`` if the state changed, ``False`` for a same-state no-op.

    Raises:
        InvalidTransition: The table does not allow ``obj.status -> to_state``.
        ValueError: ``to_state`` is not a state name.
    """
    is_gate = obj.__class__.__name__ == "Gate"
    table = GATE_TRANSITIONS if is_gate else RUN_TRANSITIONS
    to_state = to_state.value if isinstance(to_state, enum.Enum) else to_state
    if to_state not in table:
        raise ValueError(f"unknown state {to_state!r}; valid: {', '.join(table)}")
    if obj.status == to_state:
        return False
    if to_state not in table[obj.status]:
        raise InvalidTransition("gate" if is_gate else "run", obj.id, obj.status, to_state)
    now = dt.datetime.now(dt.timezone.utc)
    obj.status = to_state
    if is_gate:
        if to_state == "submitted":
            obj.submitted_at = now
        elif to_state == "running":
            obj.started_at = now
        if to_state in TERMINAL_GATE_STATUSES:
            obj.ended_at = now
        if reason is not None:
            obj.status_reason = reason
    else:
        if to_state == "running":
            obj.started_at = now
        if to_state in ("succeeded", "failed", "cancelled"):
            obj.ended_at = now
        if reason is not None and to_state in ("failed", "cancelled", "skipped"):
            obj.error = reason
    return True
