"""nvidia-smi text parser on recorded output."""

from __future__ import annotations

import pytest

from health.smi import QUERY_FIELDS, parse_query_gpu_csv, parse_smi_q


def test_h200_fields(h200_readings):
    assert len(h200_readings) == 2
    g = h200_readings[0]
    assert g.name == "NVIDIA H200"
    assert g.uuid == "GPU-2f0a1c54-9d3e-7b21-4c8e-51a6f0b3d912"
    assert g.pci_bus_id == "00000000:18:00.0"
    assert (g.driver_version, g.cuda_version) == ("580.159.04", "13.0")
    assert (g.max_sm_clock_mhz, g.sm_clock_mhz, g.mem_clock_mhz) == (1980, 345, 3201)
    assert (g.power_limit_w, g.default_power_limit_w, g.power_draw_w) == (700.0, 700.0, 76.18)
    assert g.temperature_c == 31
    assert g.clock_event_reasons == ("gpu_idle",)
    assert (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) == (0, 0)
    assert (g.remapped_rows_uncorrectable, g.remapped_rows_pending) == (0, False)
    assert g.remapped_rows_failure is False
    assert g.recovery_action == "none"
    assert g.num_compute_processes == 0
    assert g.nvlink_active_links is None  # -q does not carry NVLink state
    f = g.fabric
    assert (f.state, f.status, f.clique_id) == ("Completed", "Success", 0)
    assert f.cluster_uuid_is_zero
    assert h200_readings[1].pci_bus_id == "00000000:2A:00.0"


def test_gb200_fabric_health_names(gb200_text):
    gpus = parse_smi_q(gb200_text)
    assert [g.index for g in gpus] == [0, 1, 2, 3]
    f = gpus[2].fabric
    assert f.clique_id == 32766
    assert not f.cluster_uuid_is_zero
    assert f.health == {
        "degraded_bw": "false",
        "route_recovery": "false",
        "route_unhealthy": "false",
        "access_timeout_recovery": "false",
    }
    assert gpus[0].max_sm_clock_mhz == 2062


def test_active_reasons_and_processes(h200_text):
    text = h200_text.replace(
        "        SW Power Cap                                   : Not Active",
        "        SW Power Cap                                   : Active",
        1,
    ).replace(
        "            HW Thermal Slowdown                        : Not Active",
        "            HW Thermal Slowdown                        : Active",
        1,
    )
    procs = (
        "    Processes\n"
        "        GPU instance ID                                : N/A\n"
        "        Compute instance ID                            : N/A\n"
        "        Process ID                                     : 41872\n"
        "            Type                                       : C\n"
        "            Name                                       : python3\n"
        "            Used GPU Memory                            : 81234 MiB\n"
        "        GPU instance ID                                : N/A\n"
        "        Compute instance ID                            : N/A\n"
        "        Process ID                                     : 1290\n"
        "            Type                                       : G\n"
        "            Name                                       : Xorg\n"
        "            Used GPU Memory                            : 4 MiB\n"
    )
    text = text.replace(
        "    Processes                                          : None\n", procs, 1
    )
    g = parse_smi_q(text)[0]
    assert g.clock_event_reasons == ("gpu_idle", "sw_power_cap", "hw_thermal_slowdown")
    assert g.compute_pids == (41872,)
    assert g.num_compute_processes == 1


def test_old_throttle_label_and_na(h200_text):
    text = h200_text.replace("Clocks Event Reasons\n", "Clocks Throttle Reasons\n")
    text = text.replace("GPU Recovery Action                                : None",
                        "GPU Recovery Action                                : N/A")
    g = parse_smi_q(text)[0]
    assert g.clock_event_reasons == ("gpu_idle",)
    assert g.recovery_action is None


def test_no_gpu_section_is_an_error():
    with pytest.raises(ValueError, match="no 'GPU"):
        parse_smi_q("NVIDIA-SMI has failed because it couldn't communicate with the driver\n")


def test_query_gpu_csv():
    row = ("0, NVIDIA H200, GPU-2f0a1c54-9d3e-7b21-4c8e-51a6f0b3d912, 00000000:18:00.0, "
           "580.159.04, 1980, 1755, 3201, 700.00, 700.00, 612.31, 61, 0x0000000000000044, "
           "0, [N/A]")
    (g,) = parse_query_gpu_csv(row + "\n")
    assert len(QUERY_FIELDS) == 15
    assert (g.max_sm_clock_mhz, g.sm_clock_mhz, g.power_draw_w) == (1980, 1755, 612.31)
    assert g.clock_event_reasons == ("sw_power_cap", "hw_thermal_slowdown")
    assert g.ecc_uncorrected_aggregate is None
    with pytest.raises(ValueError, match="columns"):
        parse_query_gpu_csv("0, NVIDIA H200\n")
