"""Executors: where a gate's allocation runs (``local``, ``slurm``, ``debug``)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.executors.base import BaseGateExecutor, JobRef, JobState
from orchestrator.executors.plan import GatePlan

__all__ = ["BaseGateExecutor", "GatePlan", "JobRef", "JobState", "build_executor"]


def build_executor(kind: str, *, data_dir: Path, partition: str | None = None,
                   account: str | None = None) -> BaseGateExecutor:
    """Return the executor for ``kind``.

    Raises:
        ValueError: Unknown kind.
    """
    if kind == "local":
        from orchestrator.executors.local import LocalGateExecutor

        return LocalGateExecutor(data_dir)
    if kind == "slurm":
        from orchestrator.executors.slurm import SlurmGateExecutor

        return SlurmGateExecutor(partition=partition, account=account)
    if kind == "debug":
        from orchestrator.executors.debug import DebugGateExecutor

        return DebugGateExecutor()
    raise ValueError(f"executor must be local, slurm or debug, got {kind!r}")
