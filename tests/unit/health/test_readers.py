"""Reader selection (NVML -> nvidia-smi fallback) and a reading recorded on an H200."""

from __future__ import annotations

import pytest
from health_test_support import recorded_smi, smi_text

from health.clocks import nvlink_error_deltas, read_gpus, visible_gpus
from health.criteria import load_criteria
from health.judge import allocation_verdict, judge
from health.nvml import NvmlReader
from health.smi import parse_nvlink_status

RECORDED = "h200_x2_recorded_2026-11-30.txt"


def test_recorded_h200_reading_parses():
    """``nvidia-smi -q`` as recorded on the device machine (2x H200, driver 580)."""
    probe = read_gpus("vm", readers=[recorded_smi(smi_text(RECORDED))])
    assert probe.source == "nvidia-smi"
    assert [g.pci_bus_id for g in probe.readings] == ["00000000:00:06.0", "00000000:00:07.0"]
    g = probe.readings[0]
    assert g.uuid == "GPU-dad7d615-fd58-c4da-bc3b-4837741addfb"
    assert (g.name, g.max_sm_clock_mhz, g.power_limit_w) == ("NVIDIA H200", 1980, 700.0)
    assert g.driver_version == "580.159.04" and g.recovery_action == "none"
    assert g.fabric.state == "Completed" and g.fabric.clique_id == 0
    assert g.fabric.cluster_uuid_is_zero and g.fabric.health == {}
    assert g.nvlink_active_links is None  # no `nvlink -s` was recorded


def test_recorded_h200_single_node_fabric_passes():
    probe = read_gpus("vm", readers=[recorded_smi(smi_text(RECORDED))])
    from health_test_support import results_for  # noqa: PLC0415

    from health.inventory import NodeFacts, SoftwareVersions  # noqa: PLC0415

    node = NodeFacts("vm", 0, 2, probe, SoftwareVersions(python="3.12"))
    checks = judge(results_for(node), load_criteria("h200-x2"))
    assert [c.status for c in checks if c.check == "fabric"] == ["PASS", "PASS"]
    # NVLink state is not in `nvidia-smi -q`: unknown is reported as WARN, not guessed.
    assert {c.status for c in checks if c.check == "nvlink"} == {"WARN"}
    assert allocation_verdict(checks) == "degraded"


def test_nvml_unavailable_falls_back_to_smi():
    probe = read_gpus("h", readers=[NvmlReader(), recorded_smi(smi_text(RECORDED))])
    assert probe.source == "nvidia-smi" and len(probe.readings) == 2


def test_no_reader_works():
    probe = read_gpus("h", readers=[NvmlReader(), recorded_smi("")])
    assert probe.source is None and probe.readings == ()
    assert "nvml" in probe.error and "nvidia-smi" in probe.error


def test_cuda_visible_devices_filter():
    readings = read_gpus("h", readers=[recorded_smi(smi_text(RECORDED))]).readings
    assert [g.index for g in visible_gpus(readings, "1")] == [1]
    assert [g.index for g in visible_gpus(readings, "GPU-dad7d615")] == [0]
    assert [g.index for g in visible_gpus(readings, None)] == [0, 1]
    assert visible_gpus(readings, "") == []


def test_nvlink_status_and_deltas():
    text = smi_text("gb200_tray_nvlink_s.txt")
    text = text.replace("\t Link 5: 50 GB/s", "\t Link 5: <inactive>", 1)
    counts = parse_nvlink_status(text)
    assert counts == {0: 17, 1: 18, 2: 18, 3: 18}
    probe = read_gpus("t", readers=[recorded_smi(smi_text("gb200_tray_sentinel.txt"), text)])
    assert [g.nvlink_active_links for g in probe.readings] == [17, 18, 18, 18]
    assert nvlink_error_deltas(probe.readings, probe.readings) == {}


def test_smi_runner_failure_is_runtime_error():
    with pytest.raises(RuntimeError, match="nothing recorded"):
        recorded_smi("")._run("-q", "-x")
