"""Executor interface (submitit's shape): submit a plan, poll many jobs, cancel one."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence

from orchestrator.executors.plan import GatePlan

__all__ = ["BaseGateExecutor", "JobRef", "JobState"]

TERMINAL_SCHEDULER_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "BOOT_FAIL", "DEADLINE", "FINISHED", "INTERRUPTED", "GONE"}
)
"""States after which a job never runs again (``REQUEUED`` is not one: it pends again)."""


@dataclasses.dataclass(frozen=True)
class JobRef:
    """How the service finds a submitted allocation again after a restart."""

    job_id: str
    """Scheduler job id (Slurm) or controller pid (local)."""
    folder: str
    """submitit folder holding the job's pickles and stdout/stderr."""


@dataclasses.dataclass(frozen=True)
class JobState:
    """Scheduler view of one job.

    Attributes:
        state: Scheduler state name (``PENDING``, ``RUNNING``, ``COMPLETED``,
            ``CANCELLED by <uid>``, ``TIMEOUT``, ..., ``GONE`` for a local process that no longer
            exists, ``UNKNOWN`` when the scheduler said nothing).
        started: The job has started (or finished) on its allocation.
    """

    state: str
    started: bool
    reason: str | None = None
    """Scheduler's reason code (Slurm: ``Resources`` while pending, ...), if any."""
    exit_code: str | None = None
    """Scheduler's exit code of an ended job (Slurm: ``<code>:<signal>``), if known."""

    @property
    def terminal(self) -> bool:
        """The job has ended (whatever the driver wrote)."""
        return (self.state.split() or [""])[0].rstrip("+") in TERMINAL_SCHEDULER_STATES


class BaseGateExecutor(abc.ABC):
    """Submits one allocation-sized job per gate whose function is the driver."""

    kind: str

    @abc.abstractmethod
    def submit(self, plan: GatePlan) -> JobRef:
        """Submit the driver for ``plan``; returns the job reference to persist."""

    @abc.abstractmethod
    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobState]:
        """Return the state of every job, keyed by ``job_id``, in one batched query."""

    @abc.abstractmethod
    def cancel(self, ref: JobRef) -> None:
        """Stop a job (the driver gets SIGTERM and records ``cancelled``)."""
