"""Timing reduction, MFU, peak table, record formatting."""

import json
import math

import pytest

from trainer import metrics, records


def test_step_timer_fetch_to_fetch_and_sync_on_close():
    ticks = iter([0.0, 1.0, 3.0, 6.0])
    synced = []
    timer = metrics.StepTimer(lambda: synced.append(True), clock=lambda: next(ticks))
    timer.fetch()
    timer.fetch()
    timer.fetch()
    assert not synced
    timer.close()
    assert synced == [True]
    assert timer.step_s == [1.0, 2.0, 3.0]


def test_slowest_rank_and_median():
    per_rank = [[1.0, 2.0, 5.0, 1.0], [2.0, 1.0, 1.0, 4.0]]
    slowest = metrics.slowest_rank(per_rank)
    assert slowest == [2.0, 2.0, 5.0, 4.0]
    assert metrics.run_median(slowest, 1) == 4.0
    assert metrics.run_median(slowest, 0) == 3.0  # even count: mean of the middle two
    with pytest.raises(ValueError):
        metrics.slowest_rank([[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError):
        metrics.run_median([1.0], 1)


def test_peak_table():
    assert metrics.peak_flops_per_gpu("NVIDIA H200") == 989e12
    assert metrics.peak_flops_per_gpu("NVIDIA H100 80GB HBM3") == 989e12
    assert metrics.peak_flops_per_gpu("NVIDIA H100 PCIe") == 756e12
    assert metrics.peak_flops_per_gpu("NVIDIA GB200") == 2.5e15
    assert metrics.peak_flops_per_gpu("NVIDIA B200") == 2.25e15
    assert metrics.peak_flops_per_gpu(None) is None
    assert metrics.peak_flops_per_gpu("Some CPU") is None


def test_mfu_matches_design_definition():
    fps, peak = 353_880_819_892_224, 989e12
    numerator = metrics.mfu_numerator_pct_s(fps, peak)
    assert numerator == pytest.approx(35.7817, rel=1e-5)
    # MFU% = numerator x local batch x grad accum / median step seconds
    assert metrics.mfu_pct(fps, 2, 1.5, peak) == pytest.approx(numerator * 2 / 1.5)


def test_record_format():
    line = records.format_record("AXBGATE_STEP", {"step": 0, "slowest_rank_step_s": 0.5,
                                                  "loss": math.nan})
    prefix, body = line.split(" ", 1)
    assert prefix == "AXBGATE_STEP"
    payload = json.loads(body)
    assert payload["v"] == 1 and payload["step"] == 0 and math.isnan(payload["loss"])
    assert "\n" not in line
