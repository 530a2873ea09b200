"""``local`` executor: the embedded default, this machine's GPUs or CPU (submitit local).

The submitit controller (and so the driver and every run) starts from a scrubbed
environment (:func:`orchestrator.executors.runenv.submission_env`), never the server's:
its ``/proc/<pid>/environ`` holds no API token, database URL or cloud key.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import submitit
from submitit.local.local import LocalJob

from orchestrator.executors.base import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.driver import reap_active_step, run_gate
from orchestrator.executors.plan import GatePaths, GatePlan
from orchestrator.executors.runenv import RunEnvPolicy, referenced_names, submission_env

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


class _ScrubbedLocalExecutor(submitit.LocalExecutor):
    """submitit's local executor whose controller process gets ``env`` instead of a copy
    of ``os.environ`` (submitit 1.5 ``start_controller`` with the environment given)."""

    def __init__(self, folder: Path, env: Mapping[str, str]) -> None:
        super().__init__(folder=folder)
        self._env = dict(env)

    def _submit_command(self, command: str) -> LocalJob:
        ntasks = self.parameters.get("tasks_per_node", 1)
        num_gpus = self.parameters.get("gpus_per_node", 0)
        env = dict(self._env)
        env.update(
            SUBMITIT_LOCAL_NTASKS=str(ntasks),
            SUBMITIT_LOCAL_COMMAND=command,
            SUBMITIT_LOCAL_TIMEOUT_S=str(int(60 * self.parameters.get("timeout_min", 2.0))),
            SUBMITIT_LOCAL_SIGNAL_DELAY_S=str(int(self.parameters.get("signal_delay_s", 30))),
            SUBMITIT_LOCAL_NODEID="0",
            SUBMITIT_LOCAL_JOB_NUM_NODES="1",
            SUBMITIT_STDERR_TO_STDOUT="1" if self.parameters.get("stderr_to_stdout", False) else "",
            SUBMITIT_EXECUTOR="local",
            CUDA_VISIBLE_DEVICES=",".join(str(k) for k in range(num_gpus)),
            SUBMITIT_LOCAL_WITH_SHELL="",
        )
        # Detached like submitit's controller: it outlives this process (a server restart).
        # The usual umask again: the server's (under run_as_user, private_files.SERVICE_UMASK)
        # is for its own files; the driver sets the modes of the gate folder's contents.
        process = subprocess.Popen([sys.executable, "-m", "submitit.local._local", str(self.folder)],
                                   env=env, umask=0o022)
        return LocalJob(folder=self.folder, job_id=str(process.pid), process=process,
                        tasks=list(range(ntasks)))


class LocalGateExecutor(BaseGateExecutor):
    """Runs the driver in a detached local process through ``submitit.LocalExecutor``."""

    kind = "local"

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def submit(self, plan: GatePlan) -> JobRef:
        """Start the driver process with a scrubbed environment; ``timeout_min`` is
        generous, runs carry deadlines."""
        folder = plan.paths.submitit_dir
        env = submission_env(os.environ, RunEnvPolicy.from_plan(plan.run_env),
                             referenced_names(plan.sides))
        executor = _ScrubbedLocalExecutor(folder=folder, env=env)
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
