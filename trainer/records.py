"""Record emitter: the ``AXBGATE_*`` lines of docs/record-contract.md (v1).

Each record is one line, ``PREFIX {json}``, printed by rank 0 only. Non-finite
floats are written as the JSON extensions ``NaN`` / ``Infinity`` that Python's
``json`` reads back, so a non-finite loss stays visible to the parser.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

RECORD_VERSION = 1
_ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "PYTORCH_", "NVSHMEM_", "SLURM_JOB_ID",
                 "SLURM_NNODES", "SLURM_NTASKS", "OMP_NUM_THREADS", "GLOO_", "MASTER_ADDR",
                 "MASTER_PORT", "WORLD_SIZE")


def format_record(prefix: str, payload: dict[str, Any]) -> str:
    """One record line: prefix, space, compact JSON with ``"v": 1`` first."""
    return f"{prefix} {json.dumps({'v': RECORD_VERSION, **payload}, separators=(',', ':'))}"


MAX_RECORD_LINE_BYTES = 1 << 20
"""Longest record line the parser accepts (docs/record-contract.md, Limits)."""


def emit_timing(payload: dict[str, Any], stream: TextIO | None = None) -> None:
    """Print ``AXBGATE_TIMING``, leaving out ``per_rank_step_s`` and then
    ``slowest_rank_step_s`` when the line would pass :data:`MAX_RECORD_LINE_BYTES` (long
    runs): the ``AXBGATE_STEP`` records carry the same series."""
    for drop in ((), ("per_rank_step_s",), ("per_rank_step_s", "slowest_rank_step_s")):
        kept = {k: v for k, v in payload.items() if k not in drop}
        if len(format_record("AXBGATE_TIMING", kept).encode()) < MAX_RECORD_LINE_BYTES:
            break
    emit("AXBGATE_TIMING", kept, stream)


def emit(prefix: str, payload: dict[str, Any], stream: TextIO | None = None) -> None:
    """Print one record line and flush (the record stream is stdout)."""
    out = stream or sys.stdout
    out.write(format_record(prefix, payload) + "\n")
    out.flush()


def process_times() -> dict[str, float]:
    """When this process started, Unix seconds (Linux ``/proc``; empty elsewhere).

    ``/proc/self/stat`` field 22 is the start time in clock ticks after boot and
    ``/proc/stat``'s ``btime`` the boot time in Unix seconds (proc(5)).
    """
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                     if line.startswith("btime "))
        return {"process_start_unix": btime + ticks / os.sysconf("SC_CLK_TCK")}
    except (OSError, ValueError, StopIteration, IndexError):
        return {}


def _git(*args: str) -> str | None:
    try:
        res = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip()


def _nvml_facts(index: int) -> dict[str, Any]:
    """Driver, clocks, power limit and throttle reasons via NVML; {} when unavailable."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            driver = pynvml.nvmlSystemGetDriverVersion()
            return {
                "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
                "max_sm_clock_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "power_limit_w": pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
                "throttle_reasons": int(pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)),
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - NVML failures become missing facts, never a guess
        return {}


def _provenance_env() -> dict[str, str]:
    """The launch-relevant variables of this run; values of the names the launcher lists
    in ``AXBGATE_MASKED_ENV`` (secret-looking names) read ``***``."""
    masked = set(filter(None, os.environ.get("AXBGATE_MASKED_ENV", "").split(",")))
    return {k: "***" if k in masked else v for k, v in sorted(os.environ.items())
            if k.startswith(_ENV_PREFIXES)}


def provenance(recipe: dict[str, Any], hostnames: list[str], gpu_model: str | None,
               num_gpus: int, local_device_index: int | None) -> dict[str, Any]:
    """Payload of ``AXBGATE_PROVENANCE``.

    Args:
        recipe: ``Recipe.model_dump()``.
        hostnames: One hostname per rank (deduplicated, order kept).
        gpu_model: CUDA device name or None on CPU.
        num_gpus: GPUs in the run (0 on CPU).
        local_device_index: Rank 0's CUDA device index for NVML, or None.

    Returns:
        The provenance mapping.
    """
    import torch

    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError):
            nccl = None
    status = _git("status", "--porcelain")
    out: dict[str, Any] = {
        "hostnames": list(dict.fromkeys(hostnames)),
        "gpu_model": gpu_model,
        "num_gpus": num_gpus,
        "cuda_version": torch.version.cuda,
        "nccl_version": nccl,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "recipe": recipe,
        "env": _provenance_env(),
        "command": list(sys.argv),
        "source_sha": _git("rev-parse", "HEAD"),
        "source_dirty": None if status is None else bool(status),
        "host": socket.gethostname(),
    }
    if local_device_index is not None:
        out.update(_nvml_facts(local_device_index))
    return out
