"""Fabric probe: NVLink/MNNVL domain membership of every GPU (DESIGN.md 4.3).

Fabric information comes with each ``GpuReading`` (NVML ``nvmlDeviceGetGpuFabricInfoV``
or the ``Fabric`` block of ``nvidia-smi -q``). This module lays it out per GPU and
groups GPUs by domain, (cluster UUID, clique id); ``judge`` applies the rules.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from health.clocks import GpuProbe
from health.readings import FabricReading

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FabricObservation:
    """The fabric state of one GPU of the allocation."""

    host: str
    gpu_index: int
    gpu_uuid: str | None
    fabric: FabricReading | None
    """None when the reader had no fabric information for this GPU."""

    @property
    def domain(self) -> tuple[str | None, int | None] | None:
        """(cluster UUID, clique id), or None without fabric information."""
        if self.fabric is None:
            return None
        return (self.fabric.cluster_uuid, self.fabric.clique_id)


def observe_fabric(probes: Sequence[GpuProbe]) -> tuple[FabricObservation, ...]:
    """Flatten the per-node probes into one observation per GPU.

    Args:
        probes: one GPU probe per node.

    Returns:
        Observations in node order, then GPU index order.
    """
    return tuple(
        FabricObservation(p.host, r.index, r.uuid, r.fabric) for p in probes for r in p.readings
    )


def group_domains(
    observations: Sequence[FabricObservation],
) -> dict[tuple[str | None, int | None], list[FabricObservation]]:
    """Group GPUs by fabric domain.

    Args:
        observations: ``observe_fabric`` output.

    Returns:
        (cluster UUID, clique id) -> the GPUs in it; GPUs without fabric
        information are left out.
    """
    groups: dict[tuple[str | None, int | None], list[FabricObservation]] = {}
    for obs in observations:
        if obs.domain is not None:
            groups.setdefault(obs.domain, []).append(obs)
    return groups
