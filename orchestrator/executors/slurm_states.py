"""Slurm job states in plain words, and what each means for a gate (pure functions).

Names and meanings: Slurm's ``squeue(1)`` "JOB STATE CODES" and "JOB REASON CODES" and
``sacct(1)`` "JOB STATE CODES" (Slurm 22.05). ``sacct`` writes a cancel as ``CANCELLED by
<uid>``; both tools append ``+`` to states of jobs still being cleaned up.

A gate's own driver records what happened inside the allocation (``status.json``); these
reasons are for what only the scheduler knows: a job that ended before or around its driver
(time limit, memory, a node, preemption, a deadline, an operator's ``scancel``).
"""

from __future__ import annotations

import dataclasses
import pwd

__all__ = ["END_STATES", "SlurmJobInfo", "base_state", "end_reason", "external_gate_status",
           "pending_text", "parse_sacct", "parse_squeue_states"]

END_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
                        "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
"""States after which the job never runs again (``REQUEUED`` goes back to ``PENDING``)."""

_END_TEXT = {
    "COMPLETED": "ended normally (Slurm COMPLETED)",
    "FAILED": "failed: its batch script exited non-zero (Slurm FAILED)",
    "TIMEOUT": "reached its time limit (Slurm TIMEOUT); raise topology.time_limit_min",
    "OUT_OF_MEMORY": "ran out of memory (Slurm OUT_OF_MEMORY)",
    "NODE_FAIL": "lost a node: a node of the allocation failed (Slurm NODE_FAIL)",
    "PREEMPTED": "was preempted by a higher-priority job (Slurm PREEMPTED)",
    "BOOT_FAIL": "never started: a node failed to boot (Slurm BOOT_FAIL)",
    "DEADLINE": "missed its deadline (Slurm DEADLINE)",
    "REQUEUED": "was requeued by Slurm (REQUEUED)",
}

_PENDING_TEXT = {
    "Priority": "waiting behind higher-priority jobs",
    "Resources": "waiting for nodes to become free",
    "BeginTime": "waiting for its requested start time",
    "Dependency": "waiting for a job it depends on",
    "ReqNodeNotAvail": "a requested node is down, drained or reserved",
    "PartitionNodeLimit": "asks for more nodes than the partition allows",
    "PartitionTimeLimit": "asks for more time than the partition allows",
    "PartitionDown": "the partition is down",
    "QOSMaxJobsPerUserLimit": "the QOS limit of running jobs per user is reached",
    "AssocGrpCPULimit": "the account's CPU limit is reached",
    "JobHeldUser": "held by its user (scontrol release)",
    "JobHeldAdmin": "held by an administrator",
    "Reservation": "waiting for its reservation to start",
}


@dataclasses.dataclass(frozen=True)
class SlurmJobInfo:
    """One job as the scheduler reports it."""

    state: str
    """Raw state (``PENDING``, ``RUNNING``, ``CANCELLED by 0``, ``TIMEOUT``, ...)."""
    reason: str | None = None
    """Slurm's reason code (``Resources``, ``BeginTime``, ``NonZeroExitCode``, ...) or None."""
    exit_code: str | None = None
    """``sacct`` ExitCode, ``<code>:<signal>``."""


def base_state(raw: str) -> str:
    """``CANCELLED by 1000`` -> ``CANCELLED``; ``COMPLETING+`` -> ``COMPLETING``."""
    return (raw.split() or ["UNKNOWN"])[0].rstrip("+")


def _canceller(raw: str) -> str:
    parts = raw.split()
    if len(parts) < 3 or parts[1] != "by":
        return "by someone outside axbgate (scancel)"
    uid = parts[2]
    try:
        name = pwd.getpwuid(int(uid)).pw_name
    except (ValueError, KeyError):
        name = None
    if uid == "0":
        return "by root (uid 0: an administrator or Slurm itself)"
    return f"by user {name} (uid {uid})" if name else f"by uid {uid}"


def end_reason(job_id: str, info: SlurmJobInfo) -> str:
    """A plain sentence for how allocation job ``job_id`` ended.

    Args:
        job_id: Scheduler job id.
        info: Its last known state.

    Returns:
        E.g. ``allocation job 12 reached its time limit (Slurm TIMEOUT); raise
        topology.time_limit_min`` or ``allocation job 12 was cancelled by user alice (uid
        1000) (Slurm CANCELLED)``.
    """
    state = base_state(info.state)
    if state == "CANCELLED":
        text = f"was cancelled {_canceller(info.state)} (Slurm CANCELLED)"
    else:
        text = _END_TEXT.get(state, f"ended in Slurm state {info.state}")
    if state == "FAILED" and info.exit_code and info.exit_code != "0:0":
        text += f", exit code {info.exit_code}"
    return f"allocation job {job_id} {text}"


def external_gate_status(info: SlurmJobInfo) -> str:
    """Gate status for a job that ended without the ledger asking: ``cancelled`` when a
    person cancelled it in Slurm, else ``failed`` (no verdict either way)."""
    return "cancelled" if base_state(info.state) == "CANCELLED" else "failed"


def pending_text(reason: str | None) -> str:
    """``Resources`` -> ``pending in Slurm: waiting for nodes to become free (Resources)``."""
    if not reason or reason == "None":
        return "pending in Slurm"
    return f"pending in Slurm: {_PENDING_TEXT.get(reason, reason)} ({reason})"


def parse_squeue_states(text: str) -> dict[str, SlurmJobInfo]:
    """Parse ``squeue -h -t all -o '%i|%T|%r'`` into ``{job_id: info}``."""
    out: dict[str, SlurmJobInfo] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            reason = parts[2] if len(parts) > 2 and parts[2] not in ("", "None") else None
            out[parts[0]] = SlurmJobInfo(parts[1], reason)
    return out


def parse_sacct(text: str) -> dict[str, SlurmJobInfo]:
    """Parse ``sacct -X -n -P -o JobIDRaw,State,ExitCode,Reason`` into ``{job_id: info}``."""
    out: dict[str, SlurmJobInfo] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 2 and parts[0]:
            reason = parts[3] if len(parts) > 3 and parts[3] not in ("", "None") else None
            out[parts[0]] = SlurmJobInfo(parts[1], reason, parts[2] if len(parts) > 2 else None)
    return out
