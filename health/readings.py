"""Raw per-GPU readings shared by the NVML reader and the nvidia-smi parser.

A reading is a fact, never a judgement: the probes (``clocks``, ``fabric``) turn
readings into result dataclasses and ``judge`` decides. Both readers
(``health.nvml.NvmlReader`` and ``health.smi.SmiReader``) return the same
``GpuReading`` so every probe and test runs the same code whichever reader
produced the numbers. A field that the reader could not read is ``None``
(unknown), never a guess (STYLE.md, "Errors").

The clock-event reason bits and the fabric health-mask layout are NVML's
(``nvml.h``: ``nvmlClocksEventReason*`` and ``NVML_GPU_FABRIC_HEALTH_MASK_*``,
as exported by ``nvidia-ml-py``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, Protocol

logger = logging.getLogger(__name__)

#: NVML clock-event reason bits (``nvmlClocksEventReason*`` in ``nvml.h``), bit -> name.
CLOCK_EVENT_REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: ``nvidia-smi -q`` "Clocks Event Reasons" labels -> reason names.
SMI_REASON_LABELS: dict[str, str] = {
    "idle": "gpu_idle",
    "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown",
    "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown",
    "display clock setting": "display_clock_setting",
}

#: NVML fabric state enum (``NVML_GPU_FABRIC_STATE_*``) -> ``nvidia-smi`` spelling.
FABRIC_STATES: dict[int, str] = {
    0: "Not Supported",
    1: "Not Started",
    2: "In Progress",
    3: "Completed",
}

#: Fabric health-mask fields: name -> (shift, width, {value: label}) from
#: ``NVML_GPU_FABRIC_HEALTH_MASK_{SHIFT,WIDTH}_*`` and their value constants.
FABRIC_HEALTH_FIELDS: dict[str, tuple[int, int, dict[int, str]]] = {
    "degraded_bw": (0, 0x3, {0: "not_supported", 1: "true", 2: "false"}),
    "route_recovery": (2, 0x3, {0: "not_supported", 1: "true", 2: "false"}),
    "route_unhealthy": (4, 0x3, {0: "not_supported", 1: "true", 2: "false"}),
    "access_timeout_recovery": (6, 0x3, {0: "not_supported", 1: "true", 2: "false"}),
    "incorrect_configuration": (
        8,
        0xF,
        {
            0: "not_supported",
            1: "none",
            2: "incorrect_sysguid",
            3: "incorrect_chassis_sn",
            4: "no_partition",
            5: "insufficient_nvlinks",
            6: "incompatible_gpu_fw",
            7: "invalid_location",
            8: "gpu_state_invalid",
        },
    ),
    "partition_assigned": (12, 0x3, {0: "not_supported", 1: "true", 2: "false"}),
    "gfm_state": (14, 0x3, {0: "not_supported", 1: "connected", 2: "disconnected"}),
}

#: NVML GPU recovery action enum (``NVML_GPU_RECOVERY_ACTION_*``) -> name.
RECOVERY_ACTIONS: dict[int, str] = {
    0: "none",
    1: "gpu_reset",
    2: "node_reboot",
    3: "drain_p2p",
    4: "drain_and_reset",
    5: "recover_imex_domain",
    6: "bus_reset",
    7: "system_reboot",
}


def decode_clock_event_reasons(mask: int) -> tuple[str, ...]:
    """Decode an NVML clock-event reason bitmask into reason names.

    Args:
        mask: the bitmask from ``nvmlDeviceGetCurrentClocksEventReasons`` or the
            ``clocks_event_reasons.active`` query field (for example ``0x44``).

    Returns:
        The names of the set bits in bit order; an unknown bit becomes
        ``"unknown_0x..."`` so it is reported, not dropped.

    Raises:
        ValueError: if ``mask`` is negative.
    """
    if mask < 0:
        raise ValueError(f"clock-event reason mask must be >= 0, got {mask}")
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(CLOCK_EVENT_REASON_BITS.get(bit, f"unknown_{bit:#x}"))
        bit <<= 1
    return tuple(names)


def decode_fabric_health_mask(mask: int) -> dict[str, str]:
    """Decode an NVML fabric health mask into its named fields.

    Args:
        mask: ``healthMask`` of ``nvmlGpuFabricInfoV_t`` (32-bit).

    Returns:
        Field name -> label, e.g. ``{"degraded_bw": "false", "route_unhealthy": "false",
        ...}``; a value outside the documented set becomes ``"unknown_<n>"``.
    """
    out = {}
    for name, (shift, width, labels) in FABRIC_HEALTH_FIELDS.items():
        value = (mask >> shift) & width
        out[name] = labels.get(value, f"unknown_{value}")
    return out


@dataclasses.dataclass(frozen=True)
class FabricReading:
    """GPU fabric (NVLink/MNNVL domain) information of one GPU."""

    state: str
    """``Not Supported`` / ``Not Started`` / ``In Progress`` / ``Completed``."""
    status: str | None
    """``Success`` or the NVML error name of fabric registration; None when unread."""
    clique_id: int | None
    """NVLink clique id; 32766 (0x7ffe) is a known sentinel (DESIGN.md section 4)."""
    cluster_uuid: str | None
    """Cluster UUID as text; all zeros means the GPU is in no multi-node domain."""
    health: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Decoded health-mask fields (``decode_fabric_health_mask`` names)."""
    health_mask: int | None = None
    """The raw health mask when the reader had it (NVML), else None."""

    @property
    def cluster_uuid_is_zero(self) -> bool:
        """True when the cluster UUID is all zeros (no multi-node domain)."""
        if self.cluster_uuid is None:
            return False
        digits = self.cluster_uuid.replace("-", "").strip()
        return bool(digits) and set(digits) <= {"0"}


@dataclasses.dataclass(frozen=True)
class GpuReading:
    """Everything one read of one GPU returned. Units are in the field names."""

    index: int
    """NVML index (ignores CUDA_VISIBLE_DEVICES)."""
    name: str
    """Product name, e.g. ``NVIDIA H200``."""
    uuid: str | None = None
    pci_bus_id: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    """CUDA version the driver supports (nvidia-smi header / NVML)."""
    max_sm_clock_mhz: int | None = None
    """Max SM clock, MHz: the clock bin (DESIGN.md section 1)."""
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    """Enforced power limit, W."""
    default_power_limit_w: float | None = None
    power_draw_w: float | None = None
    temperature_c: int | None = None
    clock_event_reasons: tuple[str, ...] | None = None
    """Active clock-event (throttle) reasons by name; None when unread."""
    ecc_uncorrected_volatile: int | None = None
    """Uncorrected ECC errors since the driver loaded (volatile, total)."""
    ecc_uncorrected_aggregate: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    recovery_action: str | None = None
    """``RECOVERY_ACTIONS`` name, e.g. ``none``; None when unread."""
    num_compute_processes: int | None = None
    compute_pids: tuple[int, ...] = ()
    nvlink_active_links: int | None = None
    nvlink_errors: Mapping[str, int] | None = None
    """Summed NVLink error counters over active links: replay, recovery, crc."""
    fabric: FabricReading | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy (tuples become lists)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuReading:
        """Inverse of ``to_dict``.

        Args:
            data: a mapping produced by ``to_dict`` (e.g. after a JSON round trip).

        Returns:
            The equal ``GpuReading``.

        Raises:
            TypeError: on unknown keys.
        """
        kwargs = dict(data)
        fab = kwargs.get("fabric")
        if fab is not None:
            kwargs["fabric"] = FabricReading(**fab)
        for key in ("clock_event_reasons", "compute_pids"):
            if kwargs.get(key) is not None:
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)


class GpuReader(Protocol):
    """What a source of GPU readings provides (NVML, nvidia-smi, a recording)."""

    source: str
    """``nvml`` or ``nvidia-smi``: stored with the check so the reader is known."""

    def read(self) -> list[GpuReading]:
        """Read every GPU of this node.

        Returns:
            One reading per GPU in index order.

        Raises:
            RuntimeError: when the source is unavailable.
        """
        ...
