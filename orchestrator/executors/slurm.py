"""``slurm`` executor: real ``sbatch`` through submitit; one allocation-sized job per gate.

The driver runs in the batch step itself (submitit ``use_srun=False``), so each run can
be a full-width ``srun`` job step of the allocation. Job state comes from ``squeue``
(``sacct`` for jobs that ended) through the machine-wide scheduler cache
(:mod:`orchestrator.executors.scheduler_cache`), never per process and per second; the
driver's own ``status.json`` is the primary record of what happened.

The job is submitted with ``--export=NAME,...`` naming only the variables a run may
inherit (:func:`orchestrator.executors.runenv.submission_env`), so the batch step does not
carry the server's secrets (Slurm's default is ``--export=ALL``).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence

import submitit

from orchestrator.executors.base import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.driver import run_gate
from orchestrator.executors.plan import GatePlan
from orchestrator.executors.runenv import RunEnvPolicy, referenced_names, submission_env
from orchestrator.executors.scheduler_cache import SchedulerCache
from orchestrator.executors.slurm_states import base_state

__all__ = ["SlurmGateExecutor", "parse_squeue"]

logger = logging.getLogger(__name__)

_STARTED_STATES = {"RUNNING", "COMPLETING", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL",
                   "OUT_OF_MEMORY", "PREEMPTED", "SUSPENDED", "STOPPED"}


def parse_squeue(text: str) -> dict[str, str]:
    """Parse ``squeue -h -o '%i %T'`` output into ``{job_id: state}`` (pure)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[1]
    return out


class SlurmGateExecutor(BaseGateExecutor):
    """Submits gates with ``sbatch`` (submitit ``SlurmExecutor``)."""

    kind = "slurm"

    def __init__(self, *, partition: str | None = None, account: str | None = None,
                 cache: SchedulerCache | None = None) -> None:
        self.partition = partition
        self.account = account
        self.cache = cache or SchedulerCache()

    def submit(self, plan: GatePlan, topology: dict | None = None) -> JobRef:
        """Submit the driver as one job sized for the runs (nodes x ranks per node)."""
        topology = topology or {}
        folder = plan.paths.submitit_dir
        executor = submitit.SlurmExecutor(folder=folder)
        params = dict(
            nodes=plan.nodes,
            ntasks_per_node=plan.ranks_per_node,
            cpus_per_task=int(topology.get("cpus_per_task", 1)),
            time=int(topology.get("time_limit_min", 60)),
            job_name=f"axbgate-gate-{plan.gate_id}",
            use_srun=False,
        )
        if plan.gpus_per_node:
            params["gpus_per_node"] = plan.gpus_per_node
        partition = topology.get("partition") or self.partition
        if partition:
            params["partition"] = partition
        account = topology.get("account") or self.account
        if account:
            params["account"] = account
        if topology.get("qos"):
            params["qos"] = topology["qos"]
        extra = dict(topology.get("extra_slurm") or {})
        env = submission_env(os.environ, RunEnvPolicy.from_plan(plan.run_env),
                             referenced_names(plan.sides))
        # Names only: sbatch copies their values from its own environment; Slurm adds its
        # SLURM_* variables. NONE when nothing is allowed.
        extra["export"] = ",".join(sorted(env)) or "NONE"
        params["additional_parameters"] = extra
        executor.update_parameters(**params)
        job = executor.submit(run_gate, str(plan.paths.plan))
        logger.info("gate=%s slurm job %s", plan.gate_id, job.job_id)
        return JobRef(job_id=str(job.job_id), folder=str(folder))

    def poll(self, refs: Sequence[JobRef]) -> dict[str, JobState]:
        """States of ``refs`` from the machine-wide scheduler cache (at most one ``squeue``
        and one ``sacct`` per poll interval, whoever polls; ``scheduler_cache``)."""
        if not refs:
            return {}
        infos = self.cache.states([r.job_id for r in refs])
        out = {}
        for ref in refs:
            info = infos.get(ref.job_id)
            if info is None:
                out[ref.job_id] = JobState("UNKNOWN", started=False)
                continue
            out[ref.job_id] = JobState(info.state, started=base_state(info.state) in _STARTED_STATES,
                                       reason=info.reason, exit_code=info.exit_code)
        return out

    def cancel(self, ref: JobRef) -> None:
        """``scancel`` the job (Slurm sends SIGTERM to the batch step, then SIGKILL)."""
        subprocess.run(["scancel", ref.job_id], capture_output=True, timeout=60, check=False)
