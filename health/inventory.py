"""Inventory probe: hosts, GPU model and count per node, software versions (DESIGN.md 4.1)."""

from __future__ import annotations

import dataclasses
import logging
import platform
from collections.abc import Mapping, Sequence
from typing import Any

from health.clocks import GpuProbe

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SoftwareVersions:
    """Versions one rank's Python process sees."""

    python: str
    torch: str | None = None
    torch_cuda: str | None = None
    """CUDA runtime torch was built with."""
    nccl: str | None = None


def software_versions() -> SoftwareVersions:
    """Read the Python, PyTorch, CUDA-runtime and NCCL versions of this process.

    Returns:
        The versions; an unavailable one is None.
    """
    try:
        import torch  # noqa: PLC0415 - the inventory also runs in torch-less tools
    except ImportError:
        return SoftwareVersions(python=platform.python_version())
    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except (RuntimeError, AttributeError) as exc:
            logger.info("NCCL version unreadable: %s", exc)
    return SoftwareVersions(
        python=platform.python_version(),
        torch=torch.__version__,
        torch_cuda=torch.version.cuda,
        nccl=nccl,
    )


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """Everything the node-level probes read on one node."""

    host: str
    node_rank: int
    num_local_ranks: int
    gpus: GpuProbe
    """GPU read before any rank touched CUDA."""
    software: SoftwareVersions
    gpus_after: GpuProbe | None = None
    """GPU read at the end of the gate (NVLink counter deltas)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "host": self.host,
            "node_rank": self.node_rank,
            "num_local_ranks": self.num_local_ranks,
            "gpus": self.gpus.to_dict(),
            "software": dataclasses.asdict(self.software),
            "gpus_after": None if self.gpus_after is None else self.gpus_after.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeFacts:
        """Inverse of ``to_dict``.

        Args:
            data: a ``to_dict`` mapping.

        Returns:
            The facts.
        """
        after = data.get("gpus_after")
        return cls(
            host=data["host"],
            node_rank=data["node_rank"],
            num_local_ranks=data["num_local_ranks"],
            gpus=GpuProbe.from_dict(data["gpus"]),
            software=SoftwareVersions(**data["software"]),
            gpus_after=None if after is None else GpuProbe.from_dict(after),
        )


@dataclasses.dataclass(frozen=True)
class InventoryFacts:
    """The allocation as the gate saw it (the AXBGATE_ALLOCATION record's facts)."""

    hostnames: tuple[str, ...]
    num_nodes: int
    gpu_model: str | None
    """Product name when every GPU agrees, else the distinct names joined by '|'."""
    gpus_per_node: tuple[int, ...]
    num_gpus: int
    num_ranks: int
    driver_version: str | None = None
    cuda_version: str | None = None
    """CUDA version of the driver (NVML / nvidia-smi); torch's runtime is below."""
    torch_cuda_version: str | None = None
    nccl_version: str | None = None
    torch_version: str | None = None
    python_version: str | None = None
    gpu_source: str | None = None
    scheduler_job_id: str | None = None
    cluster: str | None = None


def summarize_inventory(
    nodes: Sequence[NodeFacts],
    *,
    num_ranks: int,
    scheduler_job_id: str | None = None,
    cluster: str | None = None,
) -> InventoryFacts:
    """Summarize per-node facts into allocation facts.

    Args:
        nodes: one entry per node, in node-rank order.
        num_ranks: ranks in the gate (GPUs, or CPU processes).
        scheduler_job_id: Slurm job id, if any.
        cluster: Slurm cluster name, if any.

    Returns:
        The inventory.

    Raises:
        ValueError: if ``nodes`` is empty.
    """
    if not nodes:
        raise ValueError("no node facts")
    names = sorted({r.name for n in nodes for r in n.gpus.readings})
    first = next((r for n in nodes for r in n.gpus.readings), None)
    sw = nodes[0].software
    return InventoryFacts(
        hostnames=tuple(n.host for n in nodes),
        num_nodes=len(nodes),
        gpu_model="|".join(names) if names else None,
        gpus_per_node=tuple(len(n.gpus.readings) for n in nodes),
        num_gpus=sum(len(n.gpus.readings) for n in nodes),
        num_ranks=num_ranks,
        driver_version=None if first is None else first.driver_version,
        cuda_version=None if first is None else first.cuda_version,
        torch_cuda_version=sw.torch_cuda,
        nccl_version=sw.nccl,
        torch_version=sw.torch,
        python_version=sw.python,
        gpu_source=nodes[0].gpus.source,
        scheduler_job_id=scheduler_job_id,
        cluster=cluster,
    )
