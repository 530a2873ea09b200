"""NVML reader (``nvidia-ml-py``): the primary source of GPU readings (DESIGN.md 4.2).

Read-only: only ``nvmlDeviceGet*`` / ``nvmlSystemGet*`` calls are made; nothing here
sets clocks, power limits or resets anything. A call that fails (not supported on
this GPU or driver) leaves its field ``None`` and is logged at debug level.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from health.readings import (
    FABRIC_STATES,
    RECOVERY_ACTIONS,
    FabricReading,
    GpuReading,
    decode_clock_event_reasons,
    decode_fabric_health_mask,
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_MAX_NVLINKS = 18  # NVML_NVLINK_MAX_LINKS on Hopper/Blackwell (nvml.h)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlReader:
    """Reads every GPU of this node through NVML."""

    source = "nvml"

    def __init__(self, lib: ModuleType | None = None) -> None:
        """Create a reader.

        Args:
            lib: the ``pynvml`` module (from ``nvidia-ml-py``); imported when None.

        Raises:
            RuntimeError: when ``nvidia-ml-py`` is not installed.
        """
        if lib is None:
            try:
                import pynvml as lib  # noqa: PLC0415 - optional at import time
            except ImportError as exc:
                raise RuntimeError("nvidia-ml-py (pynvml) is not installed") from exc
        self._nv = lib

    def _try(self, fn: Callable[..., _T], *args: Any) -> _T | None:
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            logger.debug("nvml %s%r failed: %s", getattr(fn, "__name__", fn), args, exc)
            return None

    def read(self) -> list[GpuReading]:
        """Read every GPU.

        Returns:
            One reading per NVML index.

        Raises:
            RuntimeError: when NVML cannot be initialized (no driver, no library).
        """
        nv = self._nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise RuntimeError(f"NVML init failed: {exc}") from exc
        try:
            driver = self._try(nv.nvmlSystemGetDriverVersion)
            cuda_int = self._try(nv.nvmlSystemGetCudaDriverVersion_v2)
            cuda = None if cuda_int is None else f"{cuda_int // 1000}.{cuda_int % 1000 // 10}"
            count = nv.nvmlDeviceGetCount()
            return [
                self._read_one(i, None if driver is None else _text(driver), cuda)
                for i in range(count)
            ]
        finally:
            self._try(nv.nvmlShutdown)

    def _read_one(self, index: int, driver: str | None, cuda: str | None) -> GpuReading:
        nv = self._nv
        h = nv.nvmlDeviceGetHandleByIndex(index)

        def mw_to_w(v: int | None) -> float | None:
            return None if v is None else v / 1000.0

        reasons_fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = self._try(reasons_fn, h)
        remap = self._try(nv.nvmlDeviceGetRemappedRows, h)
        procs = self._try(nv.nvmlDeviceGetComputeRunningProcesses, h)
        pci = self._try(nv.nvmlDeviceGetPciInfo, h)
        links, errors = self._nvlink(h)
        return GpuReading(
            index=index,
            name=_text(nv.nvmlDeviceGetName(h)),
            uuid=_text(self._try(nv.nvmlDeviceGetUUID, h) or "") or None,
            pci_bus_id=None if pci is None else _text(pci.busId),
            driver_version=driver,
            cuda_version=cuda,
            max_sm_clock_mhz=self._try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            sm_clock_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            mem_clock_mhz=self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            power_limit_w=mw_to_w(self._try(nv.nvmlDeviceGetEnforcedPowerLimit, h)),
            default_power_limit_w=mw_to_w(
                self._try(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)
            ),
            power_draw_w=mw_to_w(self._try(nv.nvmlDeviceGetPowerUsage, h)),
            temperature_c=self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            clock_event_reasons=None if mask is None else decode_clock_event_reasons(mask),
            ecc_uncorrected_volatile=self._try(
                nv.nvmlDeviceGetTotalEccErrors,
                h,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_VOLATILE_ECC,
            ),
            ecc_uncorrected_aggregate=self._try(
                nv.nvmlDeviceGetTotalEccErrors,
                h,
                nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_AGGREGATE_ECC,
            ),
            remapped_rows_uncorrectable=None if remap is None else int(remap[1]),
            remapped_rows_pending=None if remap is None else bool(remap[2]),
            remapped_rows_failure=None if remap is None else bool(remap[3]),
            recovery_action=self._recovery_action(h),
            num_compute_processes=None if procs is None else len(procs),
            compute_pids=() if procs is None else tuple(sorted(int(p.pid) for p in procs)),
            nvlink_active_links=links,
            nvlink_errors=errors,
            fabric=self._fabric(h),
        )

    def _recovery_action(self, h: Any) -> str | None:
        nv = self._nv
        field = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        if field is None:
            return None
        values = self._try(nv.nvmlDeviceGetFieldValues, h, [field])
        if not values or values[0].nvmlReturn != nv.NVML_SUCCESS:
            return None
        code = int(values[0].value.uiVal)
        return RECOVERY_ACTIONS.get(code, f"unknown_{code}")

    def _nvlink(self, h: Any) -> tuple[int | None, dict[str, int] | None]:
        nv = self._nv
        active = 0
        supported = False
        errors = {"replay": 0, "recovery": 0, "crc": 0}
        counters = {
            "replay": nv.NVML_NVLINK_ERROR_DL_REPLAY,
            "recovery": nv.NVML_NVLINK_ERROR_DL_RECOVERY,
            "crc": nv.NVML_NVLINK_ERROR_DL_CRC_FLIT,
        }
        for link in range(_MAX_NVLINKS):
            state = self._try(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                continue
            supported = True
            if state != nv.NVML_FEATURE_ENABLED:
                continue
            active += 1
            for name, counter in counters.items():
                value = self._try(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
                if value is not None:
                    errors[name] += int(value)
        if not supported:
            return None, None
        return active, errors

    def _fabric(self, h: Any) -> FabricReading | None:
        nv = self._nv
        info = None
        mask = None
        if hasattr(nv, "c_nvmlGpuFabricInfo_v2_t"):
            struct = nv.c_nvmlGpuFabricInfo_v2_t()
            if self._try(nv.nvmlDeviceGetGpuFabricInfoV, h, ctypes.byref(struct)) is not None:
                info = struct
                mask = int(struct.healthMask)
        if info is None and hasattr(nv, "c_nvmlGpuFabricInfo_t"):
            struct = nv.c_nvmlGpuFabricInfo_t()
            if self._try(nv.nvmlDeviceGetGpuFabricInfo, h, ctypes.byref(struct)) is not None:
                info = struct
        if info is None:
            return None
        raw_uuid = bytes(info.clusterUuid)
        hexed = raw_uuid.hex()
        uuid = f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:32]}"
        status = int(info.status)
        return FabricReading(
            state=FABRIC_STATES.get(int(info.state), f"unknown_{int(info.state)}"),
            status="Success" if status == nv.NVML_SUCCESS else _text(nv.nvmlErrorString(status)),
            clique_id=int(info.cliqueId),
            cluster_uuid=uuid,
            health={} if mask is None else decode_fabric_health_mask(mask),
            health_mask=mask,
        )


class NvmlSampler:
    """Cheap repeated reads of one GPU's clocks, power and event reasons (under load)."""

    source = "nvml"

    def __init__(self, uuid: str, lib: ModuleType | None = None) -> None:
        """Open NVML and find the GPU.

        Args:
            uuid: NVML UUID (``GPU-xxxxxxxx-...``) of the GPU to sample.
            lib: the ``pynvml`` module; imported when None.

        Raises:
            RuntimeError: when NVML is unavailable or no GPU has that UUID.
        """
        self._nv = NvmlReader(lib)._nv
        try:
            self._nv.nvmlInit()
            self._h = self._nv.nvmlDeviceGetHandleByUUID(uuid)
            self.index = int(self._nv.nvmlDeviceGetIndex(self._h))
        except self._nv.NVMLError as exc:
            raise RuntimeError(f"NVML cannot open GPU {uuid}: {exc}") from exc

    def sample(self) -> tuple[int | None, float | None, tuple[str, ...] | None]:
        """Read (SM clock MHz, power draw W, active clock-event reasons).

        Returns:
            The triple; an unreadable item is None.
        """
        nv = self._nv
        reader = NvmlReader(nv)
        clock = reader._try(nv.nvmlDeviceGetClockInfo, self._h, nv.NVML_CLOCK_SM)
        power = reader._try(nv.nvmlDeviceGetPowerUsage, self._h)
        fn = (
            getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        mask = reader._try(fn, self._h)
        return (
            clock,
            None if power is None else power / 1000.0,
            None if mask is None else decode_clock_event_reasons(mask),
        )

    def close(self) -> None:
        """Shut NVML down (once per sampler)."""
        NvmlReader(self._nv)._try(self._nv.nvmlShutdown)
