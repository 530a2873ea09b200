"""Health gate end to end on CPU: real gloo processes, real collectives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from health import run_health_gate

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _cli(*args: str, timeout: float = 120) -> tuple[int, dict, list[str]]:
    proc = subprocess.run([sys.executable, "-m", "health", "--json", "--records", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    first, _, rest = proc.stdout.partition("\n")
    return proc.returncode, json.loads(first), rest.splitlines()


def test_two_rank_gate_is_healthy():
    report = run_health_gate("cpu-gloo", nproc=2)
    by = {c.check: c for c in report.checks}
    assert report.verdict == "healthy", report.format_table()
    assert by["collective_correctness"].measured["observed"] == [3, 3]
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        m = by[f"busbw_{op}"].measured
        assert m["backend"] == "gloo" and m["world_size"] == 2 and m["busbw_gbps"] > 0
        assert m["timer"] == "wall" and m["size_bytes"] == 2 * 1024 * 1024
    assert by["network"].measured["master_addr"].split(".")[0] != "127"
    assert report.exit_code == 0
    assert report.inventory is not None and report.inventory.num_ranks == 2


# One unexplained exit 1 in ~6 full CI runs (2026-11-30, not reproduced in 16 repeats, with or
# without CPU load); the rerun is reported as RERUN in the output, and the message now
# names the failing checks so the next occurrence can be diagnosed.
@pytest.mark.flaky(reruns=1)
def test_cli_three_ranks_prints_json_and_records():
    rc, out, records = _cli("--criteria", "cpu-gloo", "--nproc", "3")
    assert rc == 0, [c for c in out.get("checks", []) if c.get("status") != "PASS"] or out
    assert out["verdict"] == "healthy"
    corr = next(c for c in out["checks"] if c["check"] == "collective_correctness")
    assert corr["measured"]["observed"] == [6, 6, 6] and corr["threshold"]["expected"] == 6
    prefixes = [r.split(" ", 1)[0] for r in records if r]
    assert prefixes[-1] == "AXBGATE_ALLOCATION"
    assert set(prefixes[:-1]) == {"AXBGATE_HEALTH"}
    alloc = json.loads(records[-1].split(" ", 1)[1])
    assert alloc["health_verdict"] == "healthy" and alloc["criteria"] == "cpu-gloo"


def test_failed_check_exits_one(tmp_path):
    crit = tmp_path / "two-nodes.toml"
    crit.write_text('name = "expects-two-nodes"\nextends = "cpu-gloo"\n[match]\nnum_nodes = 2\n')
    rc, out, _ = _cli("--criteria", str(crit))
    assert rc == 1
    assert out["verdict"] == "failed"
    assert any(c["check"] == "inventory" and c["status"] == "FAIL" for c in out["checks"])
    assert not any(c["status"] == "HANG" for c in out["checks"])


def test_usage_error_exits_two():
    proc = subprocess.run([sys.executable, "-m", "health", "--criteria", "no-such"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not found" in proc.stderr
