"""Record lines and exit codes of the report."""

from __future__ import annotations

import json

from health.judge import CheckOutcome, allocation_verdict
from health.report import HealthReport


def _report(*checks: CheckOutcome) -> HealthReport:
    return HealthReport(checks=checks, verdict=allocation_verdict(checks), inventory=None,
                        criteria_name="cpu-gloo", criteria_source="x", topology="1x2 CPU TCP")


def test_records_follow_the_contract():
    r = _report(CheckOutcome("collective_correctness", "PASS", "ok", {"observed": [3, 3]},
                             {"expected": 3}, duration_s=0.01),
                CheckOutcome("clock_bin", "WARN", "degraded", {"max_sm_clock_mhz": 1965},
                             host="t1", gpu_index=2))
    lines = r.to_records()
    assert [ln.split(" ", 1)[0] for ln in lines] == ["AXBGATE_HEALTH"] * 2 + ["AXBGATE_ALLOCATION"]
    objs = [json.loads(ln.split(" ", 1)[1]) for ln in lines]
    assert all(o["v"] == 1 for o in objs)
    assert objs[0]["check"] == "collective_correctness" and objs[0]["status"] == "PASS"
    assert objs[1]["gpu_index"] == 2 and objs[1]["host"] == "t1"
    assert "stack_dump" not in objs[0]
    assert objs[2]["health_verdict"] == "degraded" and objs[2]["criteria"] == "cpu-gloo"
    assert r.exit_code == 0


def test_exit_codes():
    assert _report(CheckOutcome("a", "PASS")).exit_code == 0
    assert _report(CheckOutcome("a", "FAIL")).exit_code == 1
    hung = _report(CheckOutcome("a", "FAIL"), CheckOutcome("b", "HANG", stack_dump="x"))
    assert hung.verdict == "failed" and hung.exit_code == 3
    assert "HANG" in hung.format_table()
