"""The command line of one run: the bundled trainer under ``torchrun``/``srun``, or the
workload's own command with its placeholders (``{out_dir}``, ``{role}``, ...) filled in."""

from __future__ import annotations

import re
from pathlib import Path

from orchestrator.executors.driver.launch import command_argv, reaper_prefix, srun_prefix
from orchestrator.executors.driver.window import recipe_overrides
from orchestrator.executors.plan import GatePlan
from orchestrator.executors.runenv import measure_env

__all__ = ["run_argv"]


def _substitute(arg: str, values: dict[str, str]) -> str:
    return re.sub(r"\{([a-z_]+)\}", lambda m: values.get(m.group(1), m.group(0)), arg)


def run_argv(plan: GatePlan, order: int, role: str, side: str, source_dir: Path | None, *,
             out_dir: Path, under_slurm: bool) -> list[str]:
    """The argv of run ``order`` (``role``, on ``side``), launcher included.

    Args:
        plan: The gate's plan.
        order: The run's index in the pattern.
        role: ``A``, ``X`` or ``B``.
        side: ``control`` or ``candidate`` (the recipe overrides it gets).
        source_dir: The side's source checkout, or None for the project root.
        out_dir: The run's own output folder (its ``{out_dir}``).
        under_slurm: Launch as an ``srun`` step (else ``torchrun`` or the command itself).

    Returns:
        The argv; ``{MASTER_ADDR}``/``{MASTER_PORT}`` are left for the launch step to fill.
    """
    if plan.workload.get("recipe"):
        overrides = recipe_overrides(plan, side)
        trainer = ["-m", "trainer", "train", "--recipe", plan.workload["recipe"], *overrides]
        if under_slurm:
            return [*srun_prefix(plan.nodes * plan.ranks_per_node, plan.ranks_per_node),
                    *reaper_prefix(plan.python), plan.python, *trainer]
        return [plan.python, "-m", "torch.distributed.run", "--nnodes=1",
                f"--nproc_per_node={plan.ranks_per_node}", "--master_addr", "{MASTER_ADDR}",
                "--master_port", "{MASTER_PORT}", *trainer]
    values = {
        "warmup_steps": str(plan.num_warmup_steps),
        "measured_steps": str(plan.num_measured_steps),
        "total_steps": measure_env(plan)["AXBGATE_TOTAL_STEPS"],
        "source_dir": str(source_dir or plan.project_root),
        "role": role,
        "run_index": str(order),
        "nproc": str(plan.nodes * plan.ranks_per_node),
        "nnodes": str(plan.nodes),
        "nproc_per_node": str(plan.ranks_per_node),
        "out_dir": str(out_dir),
    }
    return command_argv(plan.workload.get("launch", "per_node"),
                        [_substitute(arg, values) for arg in plan.workload["command"]],
                        under_slurm=under_slurm, nodes=plan.nodes,
                        ranks_per_node=plan.ranks_per_node, python=plan.python,
                        master=("{MASTER_ADDR}", "{MASTER_PORT}"),
                        wrap=reaper_prefix(plan.python))

