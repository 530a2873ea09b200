"""Bitmask decoding and reading serialization."""

from __future__ import annotations

import json

import pytest

from health.readings import GpuReading, decode_clock_event_reasons, decode_fabric_health_mask


def test_clock_event_reason_bits():
    assert decode_clock_event_reasons(0) == ()
    assert decode_clock_event_reasons(0x1) == ("gpu_idle",)
    assert decode_clock_event_reasons(0x4 | 0x8 | 0x40 | 0x80) == (
        "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert decode_clock_event_reasons(0x20 | 0x400) == ("sw_thermal_slowdown", "unknown_0x400")
    with pytest.raises(ValueError):
        decode_clock_event_reasons(-1)


def test_fabric_health_mask_fields():
    # degraded_bw false (2<<0), route_recovery false (2<<2), route_unhealthy TRUE (1<<4),
    # access_timeout false (2<<6), incorrect configuration none (1<<8),
    # partition assigned (1<<12), gfm connected (1<<14)
    mask = 2 | (2 << 2) | (1 << 4) | (2 << 6) | (1 << 8) | (1 << 12) | (1 << 14)
    assert decode_fabric_health_mask(mask) == {
        "degraded_bw": "false", "route_recovery": "false", "route_unhealthy": "true",
        "access_timeout_recovery": "false", "incorrect_configuration": "none",
        "partition_assigned": "true", "gfm_state": "connected"}
    assert decode_fabric_health_mask(5 << 8)["incorrect_configuration"] == "insufficient_nvlinks"


def test_reading_json_round_trip(h200_readings):
    g = h200_readings[1]
    back = GpuReading.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g
