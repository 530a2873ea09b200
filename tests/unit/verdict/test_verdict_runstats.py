"""run_statistics: slowest rank, warmup discard, median (DESIGN.md section 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrator.verdict import RunSummary, build_run_summary, run_statistics
from orchestrator.verdict.spread import median_standard_error


def test_one_dimensional_discards_warmup_and_takes_median() -> None:
    steps = [9.0, 8.0] + [1.0, 3.0, 2.0]
    stats = run_statistics(steps, num_warmup_steps=2)
    assert stats.median_step_s == 2.0
    assert stats.num_measured_steps == 3
    assert stats.measured_step_seconds == (1.0, 3.0, 2.0)
    assert stats.num_ranks is None
    assert stats.num_trailing_steps == 0


def test_even_count_uses_mean_of_two_middles() -> None:
    stats = run_statistics([1.0, 2.0, 4.0, 10.0], num_warmup_steps=0)
    assert stats.median_step_s == 3.0


def test_two_dimensional_takes_slowest_rank_per_step() -> None:
    per_rank = [[5.0, 1.0, 2.0, 3.0], [1.0, 1.5, 1.0, 3.5]]
    stats = run_statistics(per_rank, num_warmup_steps=1)
    assert stats.slowest_rank_step_seconds == (5.0, 1.5, 2.0, 3.5)
    assert stats.median_step_s == 2.0
    assert stats.num_ranks == 2


def test_numpy_input_is_accepted() -> None:
    arr = np.array([[0.5, 0.4, 0.42], [0.6, 0.41, 0.43]], dtype=np.float32)
    stats = run_statistics(arr, num_warmup_steps=1)
    assert math.isclose(stats.median_step_s, (0.41 + 0.43) / 2, rel_tol=1e-6)


def test_measured_window_excludes_trailing_steps() -> None:
    stats = run_statistics([9.0, 1.0, 2.0, 3.0, 100.0], num_warmup_steps=1, num_measured_steps=3)
    assert stats.median_step_s == 2.0
    assert stats.num_trailing_steps == 1


@pytest.mark.parametrize(
    ("steps", "kwargs", "match"),
    [
        ([], {"num_warmup_steps": 0}, "step_seconds must not be empty"),
        ([[]], {"num_warmup_steps": 0}, r"step_seconds\[0\]"),
        ([1.0, float("nan")], {"num_warmup_steps": 0}, r"step_seconds\[1\] must be finite"),
        ([1.0, float("inf")], {"num_warmup_steps": 0}, "finite"),
        ([1.0, 0.0], {"num_warmup_steps": 0}, r"step_seconds\[1\] must be positive"),
        ([1.0, -2.0], {"num_warmup_steps": 0}, "positive"),
        ([1.0, "x"], {"num_warmup_steps": 0}, "must be a number"),
        ([1.0, True], {"num_warmup_steps": 0}, "must be a number"),
        ([[1.0, 2.0], [1.0]], {"num_warmup_steps": 0}, r"step_seconds\[1\] has 1 steps"),
        ([[1.0, 2.0], 1.0], {"num_warmup_steps": 0}, "not mixed"),
        ([[1.0, -1.0]], {"num_warmup_steps": 0}, r"step_seconds\[0\]\[1\]"),
        ([1.0, 2.0], {"num_warmup_steps": 2}, "too few"),
        ([1.0, 2.0, 3.0], {"num_warmup_steps": 1, "num_measured_steps": 3}, "too few"),
        ([1.0], {"num_warmup_steps": -1}, "num_warmup_steps"),
        ([1.0], {"num_warmup_steps": 1.5}, "num_warmup_steps"),
        ([1.0], {"num_warmup_steps": 0, "num_measured_steps": 0}, "num_measured_steps"),
    ],
)
def test_errors_name_the_field(steps, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        run_statistics(steps, **kwargs)


def test_median_standard_error_is_the_exact_bootstrap() -> None:
    # n = 3, m = 2: the resampled median is x_(1) with P = 7/27, x_(2) 13/27, x_(3) 7/27
    se = median_standard_error([1.0, 2.0, 4.0])
    mean = (7 * 1 + 13 * 2 + 7 * 4) / 27
    var = (7 * (1 - mean) ** 2 + 13 * (2 - mean) ** 2 + 7 * (4 - mean) ** 2) / 27
    assert se == pytest.approx(math.sqrt(var))
    assert median_standard_error([2.0] * 20) == 0.0


def test_bimodal_steps_are_flagged_and_have_a_large_median_error() -> None:
    rng = np.random.default_rng(4)
    steps = (np.where(rng.random(40) < 0.5, 1.0, 1.12) * np.exp(rng.normal(0, 0.002, 40)))
    stats = run_statistics(steps.tolist(), num_warmup_steps=10, num_measured_steps=20)
    assert stats.multimodal
    assert stats.low_mode_s == pytest.approx(1.0, abs=0.01)
    assert stats.high_mode_s == pytest.approx(1.12, abs=0.01)
    assert stats.median_se_s > 0.02


@pytest.mark.parametrize("seed", range(5))
def test_unimodal_steps_with_a_hiccup_are_not_multimodal(seed) -> None:
    rng = np.random.default_rng(seed)
    steps = np.exp(rng.normal(0, 0.005, 20))
    steps[7] *= 1.15
    stats = run_statistics(steps.tolist(), num_warmup_steps=0)
    assert not stats.multimodal
    assert 0.0 < stats.median_se_s < 0.01
    assert stats.mean_step_s == pytest.approx(float(steps.mean()))


def test_build_run_summary_carries_the_spread_and_old_callers_still_work() -> None:
    stats = run_statistics([1.0, 1.01, 0.99, 1.0, 1.02], num_warmup_steps=1)
    run = build_run_summary("X", 3, stats)
    assert run.median_step_s == stats.median_step_s and run.median_se_s == stats.median_se_s
    assert run.num_measured_steps == 4 and run.multimodal is False
    old = RunSummary(role="A", order=0, median_step_s=1.0)
    assert old.median_se_s is None and old.multimodal is None and old.num_measured_steps is None
    with pytest.raises(ValueError, match="median_se_s"):
        RunSummary(role="A", order=0, median_step_s=1.0, median_se_s=float("nan"))
