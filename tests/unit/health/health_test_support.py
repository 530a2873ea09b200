"""Helpers for health unit tests: recorded nvidia-smi text and result builders."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from health.clocks import GpuProbe
from health.inventory import NodeFacts, SoftwareVersions
from health.readings import GpuReading
from health.results import GateResults
from health.smi import SmiReader

FIXTURES = Path(__file__).with_name("fixtures")


def smi_text(name: str) -> str:
    """The text of a recorded ``nvidia-smi -q`` fixture."""
    return (FIXTURES / name).read_text()


def node(host: str, readings: Sequence[GpuReading], node_rank: int = 0) -> NodeFacts:
    """Node facts as the smi reader would have produced them."""
    probe = GpuProbe(host=host, source="nvidia-smi", readings=tuple(readings))
    return NodeFacts(host, node_rank, len(readings), probe, SoftwareVersions(python="3.12"))


def results_for(*nodes: NodeFacts) -> GateResults:
    """Gate results holding only node facts (no collective stage reached)."""
    world = sum(n.num_local_ranks for n in nodes)
    return GateResults(world_size=world, num_nodes=len(nodes), backend="nccl", nodes=nodes)




def recorded_smi(q_text: str, nvlink_text: str | None = None) -> SmiReader:
    """An ``SmiReader`` that answers from recorded nvidia-smi output."""
    recorded = {("-q",): q_text}
    if nvlink_text is not None:
        recorded[("nvlink", "-s")] = nvlink_text

    def run(args: Sequence[str]) -> str:
        if tuple(args) not in recorded:
            raise RuntimeError(f"nothing recorded for nvidia-smi {' '.join(args)}")
        return recorded[tuple(args)]

    return SmiReader(runner=run)
