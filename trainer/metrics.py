"""Step timing, slowest-rank reduction, run median and MFU (DESIGN.md section 2).

Step time is wall clock from one batch fetch to the next; the last interval is
closed by a device synchronisation. Per-rank lists are gathered once after the
last step (no per-step collective perturbs the timed loop), then reduced to the
slowest rank per step. The run median is the median of the slowest-rank times of
the measured (post-warmup) steps.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

# Dense BF16 tensor-core peak per GPU, FLOP/s, matched by substring of the CUDA
# device name, most specific first. Sources (vendor datasheets, "with sparsity"
# figures halved): H100 SXM and H200 SXM 989 TFLOP/s (NVIDIA H100 / H200 Tensor
# Core GPU datasheets: 1,979 TFLOP/s sparse); H100 PCIe 756 (1,513 sparse);
# H100 NVL and H200 NVL 835 (1,671 sparse); GB200 2.5 PFLOP/s per GPU (GB200 NVL72
# datasheet: 360 PFLOP/s sparse FP16/BF16 over 72 GPUs = 5 sparse = 2.5 dense);
# B200 (HGX) 2.25 PFLOP/s (4.5 sparse); A100 312 (A100 datasheet, dense).
PEAK_BF16_DENSE_FLOPS: tuple[tuple[str, float], ...] = (
    ("GB200", 2.5e15),
    ("B200", 2.25e15),
    ("H200 NVL", 835e12),
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),
    ("A100", 312e12),
)


def peak_flops_per_gpu(device_name: str | None) -> float | None:
    """Dense BF16 peak FLOP/s of one GPU from the table above.

    Args:
        device_name: CUDA device name (``torch.cuda.get_device_name()``), or None
            on CPU.

    Returns:
        Peak FLOP/s, or None when the device is a CPU or not in the table (then
        no MFU is reported).
    """
    if not device_name:
        return None
    for key, peak in PEAK_BF16_DENSE_FLOPS:
        if key in device_name:
            return peak
    return None


class StepTimer:
    """Per-step wall time from one batch fetch to the next.

    Call :meth:`fetch` at every batch fetch and :meth:`close` after the last step;
    ``close`` synchronises the device first so queued work is included.

    Args:
        sync: Device synchronisation callable (``torch.cuda.synchronize`` or a
            no-op on CPU).
        clock: Monotonic clock in seconds.
    """

    def __init__(self, sync: Callable[[], None],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._sync, self._clock = sync, clock
        self._last: float | None = None
        self.step_s: list[float] = []

    def fetch(self) -> None:
        """Mark a batch fetch; closes the previous step's interval."""
        now = self._clock()
        if self._last is not None:
            self.step_s.append(now - self._last)
        self._last = now

    def restart(self) -> None:
        """Start the current interval again now (excludes work done since :meth:`fetch`,
        e.g. the warmup decision's collective, from the step it opened)."""
        self._last = self._clock()

    def close(self) -> None:
        """Synchronise the device and close the last interval."""
        self._sync()
        self.fetch()
        self._last = None


def slowest_rank(per_rank_step_s: list[list[float]]) -> list[float]:
    """Per-step maximum over ranks.

    Args:
        per_rank_step_s: One list of step seconds per rank, equal lengths.

    Returns:
        Slowest-rank seconds per step.

    Raises:
        ValueError: Ranks recorded different step counts.
    """
    lengths = {len(r) for r in per_rank_step_s}
    if len(lengths) != 1:
        raise ValueError(f"ranks recorded different step counts: {sorted(lengths)}")
    return [max(col) for col in zip(*per_rank_step_s)]


def steady_state_reached(slowest_s: list[float], window: int, tolerance_pct: float) -> bool:
    """Whether the last ``window`` slowest-rank step times agree within the tolerance.

    Args:
        slowest_s: Slowest-rank step seconds so far.
        window: How many of the latest steps must agree (>= 2).
        tolerance_pct: Largest allowed distance of any of them from their median,
            percent of that median.

    Returns:
        True when there are at least ``window`` steps and all of the latest ``window``
        lie within ``median x (1 +/- tolerance_pct / 100)``.
    """
    if len(slowest_s) < window:
        return False
    recent = slowest_s[-window:]
    mid = statistics.median(recent)
    return mid > 0 and max(abs(s - mid) for s in recent) <= mid * tolerance_pct / 100.0


def measured_steps_for_window(recent_s: list[float], seconds: float, minimum: int,
                              maximum: int) -> int:
    """Measured steps that fill ``seconds`` at the median of the recent step times.

    Args:
        recent_s: The latest slowest-rank step seconds (the settled warmup steps).
        seconds: Measured window, seconds of step time.
        minimum: Fewest measured steps.
        maximum: Most measured steps.

    Returns:
        ``clamp(ceil(seconds / median(recent_s)), minimum, maximum)``; ``minimum``
        when there is no usable step time.
    """
    if not recent_s or statistics.median(recent_s) <= 0:
        return minimum
    wanted = math.ceil(seconds / statistics.median(recent_s))
    return max(minimum, min(maximum, wanted))


def run_median(slowest_rank_step_s: list[float], num_warmup_steps: int) -> float:
    """Median of the measured slowest-rank step times, seconds (statistics.median)."""
    measured = slowest_rank_step_s[num_warmup_steps:]
    if not measured:
        raise ValueError("no measured steps")
    return float(statistics.median(measured))


def mfu_numerator_pct_s(flops_per_sample: int, peak_flops: float) -> float:
    """DESIGN.md MFU numerator: FLOPs per sample / peak FLOP/s x 100 (percent-seconds)."""
    return flops_per_sample / peak_flops * 100.0


def mfu_pct(flops_per_sample: int, samples_per_gpu_step: int, median_step_s: float,
            peak_flops: float) -> float:
    """MFU percent = numerator x local batch x grad accum / median step seconds.

    Args:
        flops_per_sample: Model FLOPs per sample (trainer.flops).
        samples_per_gpu_step: local batch x grad accumulation (samples per GPU per
            optimizer step).
        median_step_s: Run median, seconds.
        peak_flops: Dense BF16 peak per GPU, FLOP/s.

    Returns:
        MFU in percent.
    """
    return mfu_numerator_pct_s(flops_per_sample, peak_flops) * samples_per_gpu_step / median_step_s
