"""Optional bf16 GEMM load per GPU, sampling clocks and clock-event reasons.

Idle readings cannot show power or thermal throttling; a few seconds of dense bf16
matrix products can (issue 4, check 5). The load runs on this rank's GPU while a
thread samples that GPU through NVML (``health.nvml.NvmlSampler``). Judging the
samples (which reasons fail or warn, the clock bin) is ``judge``'s job.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

SampleFn = Callable[[], tuple[int | None, float | None, tuple[str, ...] | None]]


@dataclasses.dataclass(frozen=True)
class ClockSample:
    """One reading taken during the load."""

    t_s: float
    """Seconds since the load started."""
    sm_clock_mhz: int | None
    power_w: float | None
    clock_event_reasons: tuple[str, ...] | None


@dataclasses.dataclass(frozen=True)
class LoadResult:
    """What the GEMM load achieved and what the GPU reported meanwhile."""

    host: str
    rank: int
    gpu_uuid: str | None
    gpu_index: int | None
    """NVML index of the loaded GPU (None when it could not be matched)."""
    seconds: float
    num_gemms: int
    matrix_size: int
    tflops: float
    """Achieved dense bf16 TFLOP/s: num_gemms * 2 n^3 / seconds / 1e12."""
    samples: tuple[ClockSample, ...] = ()
    error: str | None = None
    """Why sampling was impossible (the GEMM numbers still stand)."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        """Inverse of ``dataclasses.asdict``.

        Args:
            data: the mapping.

        Returns:
            The result.
        """
        kw = dict(data)
        kw["samples"] = tuple(
            ClockSample(
                s["t_s"],
                s["sm_clock_mhz"],
                s["power_w"],
                None if s["clock_event_reasons"] is None else tuple(s["clock_event_reasons"]),
            )
            for s in kw.get("samples", ())
        )
        return cls(**kw)


def run_gemm_load(
    *,
    device: torch.device,
    seconds: float,
    matrix_size: int,
    sample: SampleFn | None,
    sample_interval_s: float,
    host: str,
    rank: int,
    gpu_uuid: str | None,
    gpu_index: int | None,
    sample_error: str | None = None,
) -> LoadResult:
    """Run back-to-back bf16 GEMMs for ``seconds`` and sample the GPU meanwhile.

    Args:
        device: a CUDA device.
        seconds: load duration, s.
        matrix_size: side n of the square (n x n) bf16 operands.
        sample: returns (SM clock MHz, power W, reasons); None when unavailable.
        sample_interval_s: seconds between samples.
        host: hostname, stored.
        rank: global rank, stored.
        gpu_uuid: NVML UUID of the device, stored.
        gpu_index: NVML index of the device, stored.
        sample_error: why ``sample`` is None, stored.

    Returns:
        The load result.

    Raises:
        ValueError: if ``device`` is not CUDA or sizes are not positive.
    """
    import torch  # noqa: PLC0415 - keep the result types importable without torch

    if device.type != "cuda":
        raise ValueError("the GEMM load needs a CUDA device")
    if seconds <= 0 or matrix_size <= 0:
        raise ValueError("seconds and matrix_size must be > 0")
    a = torch.randn(matrix_size, matrix_size, device=device, dtype=torch.bfloat16)
    b = torch.randn(matrix_size, matrix_size, device=device, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    samples: list[ClockSample] = []
    stop = threading.Event()
    t_start = time.perf_counter()

    def sampler() -> None:
        assert sample is not None
        while not stop.wait(sample_interval_s):
            clock, power, reasons = sample()
            samples.append(ClockSample(time.perf_counter() - t_start, clock, power, reasons))

    thread = threading.Thread(target=sampler, name="load-sampler", daemon=True)
    if sample is not None:
        thread.start()
    num = 0
    batch = 16
    while time.perf_counter() - t_start < seconds:
        for _ in range(batch):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize(device)
        num += batch
    elapsed = time.perf_counter() - t_start
    stop.set()
    if sample is not None:
        thread.join()
    return LoadResult(
        host=host,
        rank=rank,
        gpu_uuid=gpu_uuid,
        gpu_index=gpu_index,
        seconds=elapsed,
        num_gemms=num,
        matrix_size=matrix_size,
        tflops=num * 2.0 * matrix_size**3 / elapsed / 1e12,
        samples=tuple(samples),
        error=sample_error,
    )
