"""busbw convention (nccl-tests doc/PERFORMANCE.md) and localization groups."""

from __future__ import annotations

import pytest

from health.collectives import BandwidthResult, bus_factor, busbw_gbps, localization_groups


def test_bus_factors():
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert bus_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert bus_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError):
        bus_factor("broadcast", 2)
    with pytest.raises(ValueError):
        bus_factor("all_reduce", 0)


def test_busbw_reference_value():
    # 256 MiB all-reduce on 8 GPUs in 1.016 ms -> algbw 264.21 GB/s, busbw 462.36 GB/s
    assert busbw_gbps("all_reduce", 256 * 2**20, 1.016e-3, 8) == pytest.approx(462.364, abs=0.001)
    with pytest.raises(ValueError):
        busbw_gbps("all_reduce", 1, 0.0, 2)


def test_slowest_rank_drives_busbw():
    r = BandwidthResult("all_reduce", "nccl", "bfloat16", 2 * 10**9, (0, 1), 8, 128,
                        "cuda_events", (0.010, 0.020), 20.0, 21.0)
    assert r.slowest_rank_mean_s == 0.020
    assert r.algbw_gbps == pytest.approx(100.0)
    assert r.busbw_gbps == pytest.approx(100.0)
    assert BandwidthResult.from_dict(r.to_dict()) == r


def test_localization_groups():
    assert localization_groups(2, 2) == [[(0, 1)]]
    assert localization_groups(4, 4) == [[(0, 1), (2, 3)], [(1, 2), (3, 0)]]
    assert localization_groups(8, 4)[-1] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert localization_groups(1, 1) == []
