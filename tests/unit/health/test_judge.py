"""Judge rules: clock bins, GPU state, collectives, hangs, verdicts."""

from __future__ import annotations

import dataclasses

import pytest
from health_test_support import node, recorded_smi, results_for, smi_text

from health.clocks import read_gpus
from health.collectives import BandwidthResult, CorrectnessResult
from health.criteria import load_criteria
from health.inventory import NodeFacts, SoftwareVersions
from health.judge import (
    allocation_verdict,
    busbw_status,
    classify_clock_bin,
    clock_bin_summary,
    judge,
    worst,
)
from health.load import ClockSample, LoadResult
from health.nvml import NvmlReader
from health.results import GateResults, StageError
from health.smi import parse_smi_q
from health.timeouts import HangRecord, RankExit


def _by(checks, name):
    return [c for c in checks if c.check == name]


def _set_max_sm(text: str, mhz: int, gpu: int) -> str:
    sections = text.split("GPU 00000000:")
    sections[gpu + 1] = sections[gpu + 1].replace(
        "        SM                                             : 2062 MHz",
        f"        SM                                             : {mhz} MHz")
    return "GPU 00000000:".join(sections)


def _probe_node(q_text: str, nvlink_text: str) -> NodeFacts:
    probe = read_gpus("tray1", readers=[NvmlReader(), recorded_smi(q_text, nvlink_text)])
    assert probe.source == "nvidia-smi"  # no NVML on the CI machine: the fallback reads
    return NodeFacts("tray1", 0, len(probe.readings), probe, SoftwareVersions(python="3.12"))


def test_degraded_clock_bin_makes_allocation_degraded(gb200_text):
    """A GPU whose max SM clock is in the degraded bin (1965 MHz) -> degraded."""
    links = smi_text("gb200_tray_nvlink_s.txt")
    text = gb200_text.replace("CliqueId                                       : 32766",
                              "CliqueId                                       : 4021")
    crit = load_criteria("gb200-x4")
    healthy = judge(results_for(_probe_node(text, links)), crit)
    assert allocation_verdict(healthy) == "healthy", [c for c in healthy if c.status != "PASS"]
    res = results_for(_probe_node(_set_max_sm(text, 1965, gpu=1), links))
    assert res.nodes[0].gpus.readings[1].max_sm_clock_mhz == 1965
    checks = judge(res, crit)
    bins = {c.gpu_index: c for c in _by(checks, "clock_bin")}
    assert bins[1].status == "WARN" and "degraded" in bins[1].message
    assert bins[0].status == "PASS"
    assert allocation_verdict(checks) == "degraded"
    assert clock_bin_summary(res, crit) == ("degraded", 1965)


def test_unknown_clock_bin_fails(gb200_text):
    gpus = parse_smi_q(_set_max_sm(gb200_text, 1500, gpu=0))
    checks = judge(results_for(node("t", gpus)), load_criteria("gb200-x4"))
    assert {c.gpu_index: c.status for c in _by(checks, "clock_bin")}[0] == "FAIL"


def test_classify_clock_bin_tolerance():
    ck = load_criteria("gb200-x4").clocks
    assert classify_clock_bin(2062, ck) == "healthy"
    assert classify_clock_bin(2055, ck) == "healthy"
    assert classify_clock_bin(1965, ck) == "degraded"
    assert classify_clock_bin(None, ck) == "unreadable"
    assert classify_clock_bin(1800, ck) == "unknown"


def test_gpu_state_rules(h200_readings):
    g0, g1 = h200_readings
    bad = dataclasses.replace(
        g0, compute_pids=(99,), num_compute_processes=1, power_limit_w=500.0,
        clock_event_reasons=("hw_slowdown",), ecc_uncorrected_volatile=3,
        remapped_rows_pending=True, recovery_action="gpu_reset", nvlink_active_links=17)
    crit = load_criteria("h200-x2")
    checks = judge(results_for(node("h", [bad, dataclasses.replace(g1, nvlink_active_links=18)])),
                   crit)
    gpu0 = {c.check: c.status for c in checks if c.gpu_index == 0}
    assert gpu0 == {"gpu_idle": "WARN", "clock_bin": "PASS", "power_limit": "WARN",
                    "clock_events": "FAIL", "ecc": "FAIL", "remapped_rows": "WARN",
                    "recovery_action": "FAIL", "nvlink": "FAIL", "fabric": "PASS"}
    gpu1 = {c.check: c.status for c in checks if c.gpu_index == 1}
    assert set(gpu1.values()) == {"PASS"}


def test_nvlink_counter_growth_warns(h200_readings):
    g = dataclasses.replace(h200_readings[0], nvlink_active_links=18,
                            nvlink_errors={"replay": 4, "recovery": 0, "crc": 0})
    later = dataclasses.replace(g, nvlink_errors={"replay": 9, "recovery": 0, "crc": 0})
    n = node("h", [g])
    n = dataclasses.replace(n, gpus_after=dataclasses.replace(n.gpus, readings=(later,)))
    checks = judge(results_for(n), load_criteria("h200-x1"))
    (nv,) = _by(checks, "nvlink")
    assert nv.status == "WARN" and nv.measured["error_deltas"]["replay"] == 5


def test_wrong_model_and_count_fail(h200_readings):
    checks = judge(results_for(node("h", h200_readings[:1])), load_criteria("gb200-x4"))
    (inv,) = [c for c in _by(checks, "inventory") if c.host == "h"]
    assert inv.status == "FAIL"
    assert "not GB200" in inv.message and "expected 4" in inv.message


def _bw(op, n, mean_s, size=256 * 2**20):
    return BandwidthResult(op, "nccl", "bfloat16", size, tuple(range(n)), 8, 128,
                           "cuda_events", (mean_s,) * n, mean_s * 1e3, mean_s * 1e3)


def test_busbw_ratios():
    col = load_criteria("h200-x2").collectives
    assert col.baseline_busbw_gbps["all_reduce"] == 296.0
    assert busbw_status("all_reduce", 290.0, col)[0] == "PASS"
    assert busbw_status("all_reduce", 275.0, col)[0] == "WARN"  # < 0.95 * 296
    assert busbw_status("all_reduce", 260.0, col)[0] == "FAIL"  # < 0.90 * 296
    status, threshold, msg = busbw_status("all_gather", 1.0, load_criteria("h200-x8").collectives)
    assert status == "PASS" and threshold == {} and "no baseline" in msg


def test_collective_checks_and_single_rank():
    crit = load_criteria("h200-x2")
    size = 256 * 2**20
    slow = _bw("all_reduce", 2, size / 250e9)  # 250 GB/s busbw on 2 ranks
    res = GateResults(2, 1, "nccl", correctness=CorrectnessResult(2, 3, (3, 4), 0.01),
                      bandwidth=(slow,), stage_seconds={"rendezvous": 1.0})
    checks = judge(res, crit)
    assert _by(checks, "collective_correctness")[0].status == "FAIL"
    (bw,) = _by(checks, "busbw_all_reduce")
    assert bw.status == "FAIL" and bw.measured["busbw_gbps"] == pytest.approx(250.0)
    one = GateResults(1, 1, "nccl", bandwidth=(_bw("all_reduce", 1, 0.001),))
    assert _by(judge(one, load_criteria("h200-x1")), "busbw_all_reduce")[0].status == "PASS"


def test_load_reasons():
    def load(reasons):
        s = ClockSample(0.1, 1980, 690.0, reasons)
        return LoadResult("h", 0, "GPU-x", 0, 3.0, 1000, 8192, 700.0, (s,))

    gb, h200 = load_criteria("gb200-x4"), load_criteria("h200-x1")
    for crit, reasons, want in [
        (gb, (), "PASS"),
        (gb, ("sw_power_cap",), "WARN"),  # issue 4 default: SW power cap warns
        (h200, ("sw_power_cap",), "PASS"),  # H200 criteria: normal at 700 W (measured)
        (h200, ("hw_power_brake_slowdown",), "FAIL"),
        (gb, ("sw_thermal_slowdown",), "FAIL"),
    ]:
        res = GateResults(1, 1, "nccl", loads=(load(reasons),))
        assert _by(judge(res, crit), "load")[0].status == want, (crit.name, reasons)


def test_hang_is_hang_and_failed_with_other_ranks_dump():
    hang = HangRecord("correctness", 0, "h", 5.0, "Thread 0x1 ...all_reduce...")
    exits = (RankExit(0, 10, 3, False), RankExit(1, 11, -15, True, "File rank.py line 9"))
    res = GateResults(2, 1, "gloo", hangs=(hang,), rank_exits=exits,
                      errors=(StageError("bandwidth", 1, "h", "RuntimeError: x"),))
    checks = judge(res, load_criteria("cpu-gloo"))
    (h,) = [c for c in checks if c.status == "HANG"]
    assert h.check == "collective_correctness"
    assert "all_reduce" in h.stack_dump and "rank 1 (pid 11) terminated" in h.stack_dump
    assert _by(checks, "busbw")[0].status == "FAIL"
    assert allocation_verdict(checks) == "failed"


def test_worst_order():
    assert worst([]) == "PASS"
    assert worst(["WARN", "PASS"]) == "WARN"
    assert worst(["FAIL", "HANG", "WARN"]) == "HANG"


def test_judge_is_torch_free():
    import subprocess
    import sys

    code = ("import sys, health.judge, health.preamble, health.criteria; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
