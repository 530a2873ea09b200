"""Rank facts and the two collectives the timer uses, through ``torch.distributed``.

Nothing here imports torch unless a process group is running or torch was already imported
by the program (a single process without torch never loads it). Launchers: ``torchrun``
(``RANK``/``WORLD_SIZE``), ``srun`` per rank (``SLURM_PROCID``/``SLURM_NTASKS``) and a lone
process (rank 0 of 1).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["Ranks", "device_sync", "init_distributed", "launch_world_size"]


def launch_world_size(environ: Mapping[str, str] | None = None) -> int:
    """World size the launcher announced (``WORLD_SIZE``, else ``SLURM_NTASKS``, else 1).

    Raises:
        ValueError: The variable is not a positive integer.
    """
    env = os.environ if environ is None else environ
    raw = env.get("WORLD_SIZE") or (env.get("SLURM_NTASKS") if "SLURM_PROCID" in env else None) or "1"
    try:
        world = int(raw)
    except ValueError:
        raise ValueError(f"WORLD_SIZE/SLURM_NTASKS={raw!r} is not an integer") from None
    if world < 1:
        raise ValueError(f"WORLD_SIZE/SLURM_NTASKS={raw!r} must be at least 1")
    return world


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Start ``torch.distributed`` from torchrun's or Slurm's variables (imports torch).

    Under ``srun`` one task per rank, without ``RANK``: ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``
    are filled from ``SLURM_PROCID``/``SLURM_NTASKS``/``SLURM_LOCALID``; ``MASTER_ADDR`` and
    ``MASTER_PORT`` come from the launch (the gate driver sets them for every run). A lone
    process is rank 0 of 1 and starts no process group.

    Args:
        backend: ``nccl``/``gloo``; None: NCCL when CUDA is available, else gloo.

    Returns:
        ``(rank, world_size)``.

    Raises:
        ValueError: Several ranks without ``MASTER_ADDR``/``MASTER_PORT``.
    """
    env = os.environ
    if "RANK" not in env and "SLURM_PROCID" in env:
        env["RANK"], env["WORLD_SIZE"] = env["SLURM_PROCID"], env.get("SLURM_NTASKS", "1")
        env["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
    world = launch_world_size(env)
    if world == 1:
        return 0, 1
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in env]
    if missing:
        raise ValueError(f"{world} ranks need {' and '.join(missing)} in the environment")
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(env.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    if not dist.is_initialized():
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"))
    return dist.get_rank(), dist.get_world_size()


def _torch_dist() -> Any | None:
    """``torch.distributed`` when torch is loaded and a process group is initialised."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = torch.distributed
    return dist if dist.is_available() and dist.is_initialized() else None


def device_sync() -> None:
    """Wait for the device's queued work: CUDA when torch has initialised it, else nothing."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class Ranks:
    """This process's rank and the collectives over all ranks (or a lone process).

    Args:
        environ: Launch environment (``os.environ``).

    Raises:
        ValueError: The launcher announced more than one rank but no ``torch.distributed``
            process group is initialised (the slowest rank cannot be found).
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.dist = _torch_dist()
        if self.dist is None:
            world = launch_world_size(environ)
            if world > 1:
                raise ValueError(
                    f"the launcher started {world} ranks (WORLD_SIZE/SLURM_NTASKS) but "
                    "torch.distributed is not initialised: call init_process_group() before "
                    "the first timed step, so the timer can take the slowest rank")
            self.rank, self.world_size = 0, 1
        else:
            self.rank, self.world_size = self.dist.get_rank(), self.dist.get_world_size()

    def _device(self) -> Any:
        import torch

        if self.dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def max(self, value: float) -> float:
        """The maximum of ``value`` over all ranks (one float64 all-reduce)."""
        if self.dist is None or self.world_size == 1:
            return value
        import torch

        tensor = torch.tensor([value], dtype=torch.float64, device=self._device())
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX)
        return float(tensor.item())

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (one ``all_gather_object``)."""
        if self.dist is None or self.world_size == 1:
            return [obj]
        out: list[Any] = [None] * self.world_size
        self.dist.all_gather_object(out, obj)
        return out

    @staticmethod
    def host() -> str:
        """This host's name."""
        return socket.gethostname()
