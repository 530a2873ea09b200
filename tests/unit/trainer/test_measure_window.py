"""Warmup by steady state and the measured window by time (issue 14), pure parts."""

from __future__ import annotations

import pytest

from trainer import metrics


def test_steady_state_needs_the_whole_window_within_tolerance():
    settled = [5.0, 2.0, 1.004, 0.998, 1.0, 1.001, 0.999]
    assert metrics.steady_state_reached(settled, window=5, tolerance_pct=1.0)
    assert not metrics.steady_state_reached(settled, window=6, tolerance_pct=1.0)  # 2.0 inside
    assert not metrics.steady_state_reached(settled, window=5, tolerance_pct=0.3)
    assert not metrics.steady_state_reached([1.0, 1.0], window=5, tolerance_pct=1.0)


@pytest.mark.parametrize("recent, seconds, expected", [
    ([0.5, 0.5, 0.5], 10.0, 20),      # 10 s at 0.5 s per step
    ([0.5, 0.5, 0.5], 2.0, 8),        # below the minimum of 8 steps
    ([0.001] * 5, 10.0, 500),         # capped at the maximum
    ([], 10.0, 8),                    # no step time: the minimum
])
def test_window_steps(recent, seconds, expected):
    assert metrics.measured_steps_for_window(recent, seconds, 8, 500) == expected


def test_restart_excludes_work_between_fetch_and_restart():
    now = [0.0]
    timer = metrics.StepTimer(lambda: None, clock=lambda: now[0])
    timer.fetch()
    now[0] = 1.0
    timer.fetch()          # step 0 = 1.0 s
    now[0] = 1.3           # 0.3 s of agreement collective
    timer.restart()
    now[0] = 2.3
    timer.close()          # step 1 = 1.0 s, not 1.3 s
    assert timer.step_s == pytest.approx([1.0, 1.0])
