"""Where a run's wall time went (executors/driver/phases.py) and what the measured window
bought (verdict/precision.py)."""

from __future__ import annotations

import pytest

from orchestrator.executors.driver.phases import run_phases
from orchestrator.verdict import median_interval_halfwidth_pct


def test_phases_from_driver_times_and_the_run_timeline():
    fields = {
        "slowest_rank_step_s": [3.0, 1.0, 1.0, 0.9, 1.1, 1.0],
        "num_warmup_steps": 2, "num_measured_steps": 4,
        "result_extra": {"timeline": {
            "process_start_unix": 100.5, "imports_start_unix": 100.6, "imports_done_unix": 105.6,
            "main_start_unix": 105.7, "process_group_ready_unix": 106.7, "model_built_unix": 108.0,
            "first_step_start_unix": 108.2, "first_step_end_unix": 111.2,
            "last_step_end_unix": 116.2}},
    }
    out = run_phases(fields, launch_unix=100.0, exit_unix=117.0)
    assert out["warmup_s"] == pytest.approx(4.0)
    assert out["measured_s"] == pytest.approx(4.0)
    assert out["launcher_s"] == pytest.approx(0.5)
    assert out["imports_s"] == pytest.approx(5.0)
    assert out["process_group_s"] == pytest.approx(1.0)
    assert out["model_build_s"] == pytest.approx(1.3)
    assert out["first_step_s"] == pytest.approx(3.0)
    assert out["startup_s"] == pytest.approx(8.2)
    assert out["teardown_s"] == pytest.approx(0.8)
    assert out["fixed_s"] == pytest.approx(9.0)


def test_phases_without_a_timeline_keep_the_step_sums_only():
    out = run_phases({"slowest_rank_step_s": [1.0, 2.0], "num_warmup_steps": 1,
                      "num_measured_steps": 1}, launch_unix=0.0, exit_unix=5.0)
    assert out == {"warmup_s": 1.0, "measured_s": 2.0}


def test_median_interval_uses_order_statistics():
    # n = 20: Binomial(20, 1/2) 2.5% quantile is 6 -> interval [x_(6), x_(15)]
    values = [float(i) for i in range(1, 21)]
    assert median_interval_halfwidth_pct(values) == pytest.approx(100.0 * (15 - 6) / 2 / 10.5)
    assert median_interval_halfwidth_pct([2.0] * 30) == 0.0
    assert median_interval_halfwidth_pct([1.0]) is None
    with pytest.raises(ValueError, match="alpha"):
        median_interval_halfwidth_pct(values, alpha=1.5)
