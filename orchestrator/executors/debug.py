"""``debug`` executor: runs the driver in this process, synchronously (development)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.executors.base import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.driver import run_gate
from orchestrator.executors.plan import GatePlan

__all__ = ["DebugGateExecutor"]


class DebugGateExecutor(BaseGateExecutor):
    """``submit`` returns once the whole gate has run in-process."""

    kind = "debug"

    def submit(self, plan: GatePlan) -> JobRef:
        """Run the driver now (blocks until the gate ends)."""
        run_gate(str(plan.paths.plan))
        return JobRef(job_id=f"debug-{plan.gate_id}", folder=plan.gate_dir)

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobState]:
        """Debug jobs are always finished by the time they are polled."""
        return {r.job_id: JobState("FINISHED", started=True) for r in refs}

    def cancel(self, ref: JobRef) -> None:
        """Nothing to cancel: the gate already ran."""
