"""The health gate as a step of the driver: its command line and what its log says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.executors.driver.launch import srun_prefix
from orchestrator.executors.plan import GatePlan

__all__ = ["health_argv", "read_health_log"]


def health_argv(plan: GatePlan, job_id: str, hostnames: list[str], *, under_slurm: bool) -> list[str]:
    """``python -m health`` for the allocation: JSON plus the record lines the driver parses,
    one process per node under a multi-node Slurm job (each spawns its local ranks).

    Args:
        plan: The gate's plan (``health`` spec, ranks per node, nodes).
        job_id: The id the health records carry (``<job>-<tag>``).
        hostnames: The allocation's nodes, node 0 first.
        under_slurm: The driver runs inside a Slurm job.
    """
    argv = [plan.python, "-m", "health", "--json", "--records", "--nproc", str(plan.ranks_per_node),
            "--job-id", job_id]
    if plan.health.get("criteria"):
        argv += ["--criteria", plan.health["criteria"]]
    if under_slurm and plan.nodes > 1:
        argv = [*srun_prefix(plan.nodes, 1), *argv, "--nodes", ",".join(hostnames)]
    return argv


def read_health_log(log_path: Path, step_error: str | None
                    ) -> tuple[str, str | None, dict[str, Any], list[dict[str, Any]]]:
    """The health verdict from the driver's captured log.

    Args:
        log_path: The health step's log (``runs/health-<tag>.log``).
        step_error: Why the step itself failed (exit code, timeout), or None.

    Returns:
        ``(verdict, reason, allocation facts, check rows)``; verdict ``failed`` with a
        reason when the log has no allocation verdict or cannot be read (malformed health
        output is a failed health gate).
    """
    from orchestrator.domain.records import health_check_rows
    from orchestrator.executors.files import parse_log_file

    verdict, reason, facts, checks = "failed", step_error, {}, []
    try:
        parsed = parse_log_file(log_path)
        facts = dict(parsed.allocation or {})
        checks = health_check_rows(parsed)
        verdict = facts.get("health_verdict", "failed")
        bad = [f"{h.check}={h.status}" for h in parsed.health if h.status in ("FAIL", "HANG")]
        if verdict == "failed" and not reason:
            reason = "health gate failed: " + (", ".join(bad) or "no allocation verdict")
        elif verdict == "failed":
            reason = f"health gate {step_error}" + (f": {', '.join(bad)}" if bad else "")
    except Exception as exc:  # noqa: BLE001 - any unreadable output fails the health gate
        reason = f"health output unreadable: {exc}"
    return verdict, reason, facts, checks
