"""``local`` executor: the embedded default, this machine's GPUs or CPU (submitit local)."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import submitit

from orchestrator.executors.base import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.driver import reap_active_step, run_gate
from orchestrator.executors.plan import GatePaths, GatePlan

__all__ = ["LocalGateExecutor"]

logger = logging.getLogger(__name__)

# The driver gives its step 10 s between SIGTERM and SIGKILL; wait a little longer.
_CANCEL_GRACE_S = 15.0


def _alive(pid: int) -> bool:
    """True if ``pid`` is a running (not zombie) submitit controller."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z" and b"submitit" in cmdline


class LocalGateExecutor(BaseGateExecutor):
    """Runs the driver in a detached local process through ``submitit.LocalExecutor``."""

    kind = "local"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def submit(self, plan: GatePlan) -> JobRef:
        """Start the driver process; ``timeout_min`` is generous, runs carry deadlines."""
        folder = plan.paths.submitit_dir
        executor = submitit.LocalExecutor(folder=folder)
        executor.update_parameters(timeout_min=24 * 60, gpus_per_node=plan.gpus_per_node)
        job = executor.submit(run_gate, str(plan.paths.plan))
        logger.info("gate=%s local job %s", plan.gate_id, job.job_id)
        return JobRef(job_id=str(job.job_id), folder=str(folder))

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobState]:
        """A local job is RUNNING while its controller process lives, else GONE."""
        out = {}
        for ref in refs:
            running = ref.job_id.isdigit() and _alive(int(ref.job_id))
            out[ref.job_id] = JobState("RUNNING" if running else "GONE", started=True)
        return out

    def cancel(self, ref: JobRef) -> None:
        """SIGTERM the controller (submitit forwards it to the driver, which stops its step
        with a grace period), then reap the step's process group if the driver could not.

        Blocks up to ``_CANCEL_GRACE_S`` seconds.
        """
        if ref.job_id.isdigit() and _alive(int(ref.job_id)):
            os.kill(int(ref.job_id), signal.SIGTERM)
            deadline = time.monotonic() + _CANCEL_GRACE_S
            while _alive(int(ref.job_id)) and time.monotonic() < deadline:
                time.sleep(0.2)
        self.reap(ref)

    def reap(self, ref: JobRef) -> bool:
        """Kill what a dead driver left running (its step's process group)."""
        if ref.job_id.isdigit() and _alive(int(ref.job_id)):
            return False
        return reap_active_step(GatePaths(Path(ref.folder).parent).active_pgid)
