"""Clocks, power and GPU-state probe: NVML first, nvidia-smi as fallback (DESIGN.md 4.2).

``read_gpus`` returns every GPU of this node as ``GpuReading`` through the first
reader that works, and says which one. The probe reports; ``judge`` decides the
clock bin, throttling, power, ECC, remapped rows, recovery action and NVLink rules.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from health.readings import GpuReader, GpuReading

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class GpuProbe:
    """One read of every GPU of one node."""

    host: str
    source: str | None
    """``nvml`` or ``nvidia-smi``; None when no reader worked."""
    readings: tuple[GpuReading, ...] = ()
    error: str | None = None
    """Why no reader worked (each reader's error), else None."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy."""
        return {
            "host": self.host,
            "source": self.source,
            "readings": [r.to_dict() for r in self.readings],
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuProbe:
        """Inverse of ``to_dict``.

        Args:
            data: a ``to_dict`` mapping.

        Returns:
            The probe.
        """
        return cls(
            host=data["host"],
            source=data["source"],
            readings=tuple(GpuReading.from_dict(r) for r in data["readings"]),
            error=data["error"],
        )


def default_readers() -> list[GpuReader]:
    """NVML, then nvidia-smi (the fallback order of DESIGN.md 4.2).

    Returns:
        The readers that could be constructed (NVML needs ``nvidia-ml-py``).
    """
    from health.nvml import NvmlReader  # noqa: PLC0415 - keep pynvml optional
    from health.smi import SmiReader  # noqa: PLC0415

    readers: list[GpuReader] = []
    try:
        readers.append(NvmlReader())
    except RuntimeError as exc:
        logger.info("NVML reader unavailable: %s", exc)
    readers.append(SmiReader())
    return readers


def visible_gpus(readings: Sequence[GpuReading], visible: str | None) -> list[GpuReading]:
    """Keep the GPUs a ``CUDA_VISIBLE_DEVICES`` value exposes.

    NVML ignores ``CUDA_VISIBLE_DEVICES``; Slurm and local runs restrict a gate with it,
    so the inventory must too. Entries are NVML indices (CUDA enumerates identical
    GPUs in PCI order, as NVML does) or UUID prefixes (``GPU-1a2b...``).

    Args:
        readings: every GPU NVML or nvidia-smi reported.
        visible: the variable's value; None means all GPUs.

    Returns:
        The visible readings in the variable's order.
    """
    if visible is None:
        return list(readings)
    out = []
    for item in (x.strip() for x in visible.split(",")):
        if not item:
            continue
        if item.isdigit():
            match = [r for r in readings if r.index == int(item)]
        else:
            match = [r for r in readings if r.uuid and r.uuid.startswith(item)]
        out.extend(m for m in match if m not in out)
    return out


def read_gpus(
    host: str,
    readers: Sequence[GpuReader] | None = None,
    visible: str | None = None,
) -> GpuProbe:
    """Read every GPU of this node through the first reader that works.

    Args:
        host: this node's name, stored in the probe.
        readers: readers to try in order; ``default_readers()`` when None. Tests pass
            readers fed with recorded output.
        visible: a ``CUDA_VISIBLE_DEVICES`` value restricting the GPUs (None: all).

    Returns:
        The probe; ``source`` None and ``error`` set when every reader failed (a CPU
        machine, or a broken driver: ``judge`` decides which by the criteria).
    """
    errors = []
    for reader in readers if readers is not None else default_readers():
        try:
            readings = reader.read()
        except Exception as exc:  # noqa: BLE001 - a reader bug must not kill the gate
            if not isinstance(exc, RuntimeError):
                logger.exception("host=%s reader=%s raised", host, reader.source)
            logger.info("host=%s reader=%s failed: %s", host, reader.source, exc)
            errors.append(f"{reader.source}: {exc}")
            continue
        return GpuProbe(
            host=host, source=reader.source, readings=tuple(visible_gpus(readings, visible))
        )
    return GpuProbe(host=host, source=None, error="; ".join(errors) or "no reader")


def nvlink_error_deltas(
    before: Sequence[GpuReading], after: Sequence[GpuReading]
) -> dict[int, dict[str, int]]:
    """Growth of NVLink error counters between two reads of the same GPUs.

    Args:
        before: readings at the start of the gate.
        after: readings at the end, same GPUs (matched by index).

    Returns:
        GPU index -> counter name -> increase; GPUs without counters in both reads
        are left out.
    """
    prior = {r.index: r.nvlink_errors for r in before if r.nvlink_errors is not None}
    out = {}
    for r in after:
        if r.nvlink_errors is None or r.index not in prior:
            continue
        base = prior[r.index]
        out[r.index] = {k: int(v) - int(base.get(k, 0)) for k, v in r.nvlink_errors.items()}
    return out
