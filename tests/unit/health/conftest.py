"""Fixtures for health unit tests (recorded nvidia-smi text)."""

from __future__ import annotations

import pytest
from health_test_support import smi_text

from health.readings import GpuReading
from health.smi import parse_smi_q


@pytest.fixture
def h200_text() -> str:
    return smi_text("h200_x2_single_node.txt")


@pytest.fixture
def gb200_text() -> str:
    return smi_text("gb200_tray_sentinel.txt")


@pytest.fixture
def h200_readings(h200_text: str) -> list[GpuReading]:
    return parse_smi_q(h200_text)
