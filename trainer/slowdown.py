"""A calibrated slowdown for validating gates (``measure.delay_fraction``).

A gate validated on a known effect needs a candidate that is slower by a known fraction of
its step. A host sleep is not that on a GPU: while the host sleeps the device idles, runs
cooler and the following steps speed up (measured on 1xH200, 2026-12-04: a 1% sleep gave
+0.45% over the measured steps; benchmarks/results/decision_cost_h200x1_2026-12-04). On
CUDA the delay is therefore device work of the same kind as the step: bf16 matmuls
(``MATMUL_SIZE`` cubed) enqueued on the step's stream after the optimizer step, so the
device stays busy and the delay lands on the step's own timeline. Their count follows a
feedback loop: the target is ``fraction`` x the median undelayed time of the steps since
step 1 (the compile step 0 is left out), and the time per matmul is the one the previous
step's delay actually took (CUDA events, read after the step's host sync; first timed
before step 0). Steps 0 and 1 get no delay (nothing to size it on yet); the steady warmup
rule never ends before step 2.

On a CPU the delay stays a host sleep of ``fraction`` x the step's own time (no device to
idle).
"""

from __future__ import annotations

import statistics
import time

import torch

MATMUL_SIZE = 4096
"""Side of the square bf16 matmuls of the CUDA delay (~0.15-0.2 ms each on an H100/H200:
a 1% delay of a 0.85 s step is ~40 of them)."""
MAX_MATMULS = 100000
"""Cap on the matmuls of one step's delay."""


def matmul_count(fraction: float, undelayed_s: list[float], per_matmul_s: float) -> int:
    """Matmuls that add ``fraction`` of the median undelayed step to a step.

    Args:
        fraction: Wanted delay over the undelayed step (0.01: +1%).
        undelayed_s: Undelayed step times so far, seconds (non-empty).
        per_matmul_s: Device seconds of one matmul (last measured).

    Returns:
        round(fraction x median(undelayed_s) / per_matmul_s), clamped to
        [1, ``MAX_MATMULS``].
    """
    if per_matmul_s <= 0:
        return 1
    target = fraction * statistics.median(undelayed_s)
    return max(1, min(MAX_MATMULS, round(target / per_matmul_s)))


class CalibratedSlowdown:
    """Adds ``fraction`` of each step's own time to the step.

    Call :meth:`before_sync` after the step's work is enqueued and before the host reads
    its loss, :meth:`after_sync` once the host has synchronised, and
    :meth:`record_step_time` with each closed step's time. On CUDA the constructor times
    a few matmuls (about 10 ms, before the first step).

    Args:
        fraction: Extra time per step as a fraction of the undelayed step (0.01: +1%).
        device: The step's device.
    """

    def __init__(self, fraction: float, device: torch.device) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"delay fraction must be in (0, 1], got {fraction!r}")
        self.fraction = fraction
        self.cuda = device.type == "cuda"
        self.device = device
        self.step = 0
        self.undelayed_s: list[float] = []
        """Step time minus its measured delay, seconds, from step 1 on."""
        self.delay_s: list[float] = []
        """Measured device time of each step's delay, seconds (0 where none)."""
        self._count = 0
        self._per_matmul_s = 0.0
        self._events: tuple[torch.cuda.Event, torch.cuda.Event] | None = None
        self._host_start = 0.0
        if self.cuda:
            self._a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=torch.bfloat16)
            self._b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, device=device, dtype=torch.bfloat16)
            self._c = torch.empty_like(self._a)
            self._per_matmul_s = self._time_matmuls(8)

    def _time_matmuls(self, count: int) -> float:
        """Device seconds per matmul, from ``count`` timed after two untimed."""
        for _ in range(2):
            torch.mm(self._a, self._b, out=self._c)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            torch.mm(self._a, self._b, out=self._c)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0 / count

    def step_started(self) -> None:
        """Mark the start of a step (the CPU sleep is sized on the host time since)."""
        self._host_start = time.perf_counter()

    def before_sync(self) -> None:
        """Enqueue this step's delay on the current CUDA stream (no-op on CPU)."""
        if not self.cuda:
            return
        self._events = None
        if self.step < 2 or not self.undelayed_s:
            return
        self._count = matmul_count(self.fraction, self.undelayed_s, self._per_matmul_s)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(self._count):
            torch.mm(self._a, self._b, out=self._c)
        end.record()
        self._events = (start, end)

    def after_sync(self) -> None:
        """Close the step: on CPU sleep now; on CUDA read the delay's device time."""
        if not self.cuda:
            time.sleep(self.fraction * (time.perf_counter() - self._host_start))
            self.step += 1
            return
        took = 0.0
        if self._events is not None:
            self._events[1].synchronize()
            took = self._events[0].elapsed_time(self._events[1]) / 1000.0
            self._per_matmul_s = took / self._count
        self.delay_s.append(took)
        self.step += 1

    def record_step_time(self, step_index: int, step_s: float) -> None:
        """Feed the closed step ``step_index``'s time (seconds); step 0 is left out."""
        if step_index >= 1 and step_index < len(self.delay_s):
            self.undelayed_s.append(step_s - self.delay_s[step_index])
