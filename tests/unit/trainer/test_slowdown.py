"""The calibrated slowdown of ``measure.delay_fraction`` (trainer/slowdown.py)."""

import time

import pytest
import torch

from trainer.slowdown import MAX_MATMULS, CalibratedSlowdown, matmul_count


def test_matmul_count_is_the_fraction_of_the_median_undelayed_step():
    # 1% of the median 0.85 s = 8.5 ms at 0.2 ms per matmul: 42.5 -> 42 (round half even)
    assert matmul_count(0.01, [0.84, 0.85, 0.86], 0.0002) == 42
    # one slow step does not move the median
    assert matmul_count(0.01, [0.85, 0.85, 3.0], 0.0002) == 42
    assert matmul_count(0.02, [1.0], 0.001) == 20


def test_matmul_count_is_clamped():
    assert matmul_count(1e-6, [0.85], 0.01) == 1
    assert matmul_count(1.0, [1e6], 1e-9) == MAX_MATMULS
    assert matmul_count(0.01, [0.85], 0.0) == 1


def test_cpu_delay_sleeps_the_fraction_of_the_steps_own_time():
    slow = CalibratedSlowdown(0.5, torch.device("cpu"))
    slow.step_started()
    busy_until = time.perf_counter() + 0.04
    while time.perf_counter() < busy_until:
        pass
    slow.before_sync()  # nothing to enqueue on a CPU
    t0 = time.perf_counter()
    slow.after_sync()
    slept = time.perf_counter() - t0
    assert 0.018 <= slept <= 0.06  # 0.5 x ~0.04 s of host time


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_fraction_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="delay fraction"):
        CalibratedSlowdown(bad, torch.device("cpu"))


def test_record_step_time_leaves_out_step_zero_and_subtracts_the_measured_delay():
    slow = CalibratedSlowdown(0.01, torch.device("cpu"))
    slow.delay_s = [0.0, 0.0, 0.008]
    slow.record_step_time(0, 3.3)  # the compile step never sizes the delay
    slow.record_step_time(1, 0.84)
    slow.record_step_time(2, 0.858)
    assert slow.undelayed_s == pytest.approx([0.84, 0.85])
