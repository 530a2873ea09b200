"""A rank that never joins the first collective: HANG within the deadline, stacks
dumped, the other ranks terminated, exit status 3 (distinct from FAIL's 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 4.0

pytestmark = pytest.mark.slow


def test_rank_that_never_joins_is_a_hang(tmp_path):
    crit = tmp_path / "short.toml"
    crit.write_text(f'name = "cpu-short"\nextends = "cpu-gloo"\n[deadlines]\n'
                    f'correctness_s = {DEADLINE_S}\n')
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "health", "--json", "--records", "--criteria", str(crit), "--nproc", "3",
         "--inject-fault", "never_join:2"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    assert proc.returncode == 3, proc.stderr[-2000:]
    # deadline + process start-up (torch import, rendezvous) + termination grace
    assert DEADLINE_S <= wall < DEADLINE_S + 25
    out = json.loads(proc.stdout.partition("\n")[0])
    assert out["verdict"] == "failed" and out["exit_code"] == 3
    hangs = [c for c in out["checks"] if c["status"] == "HANG"]
    assert hangs and {h["check"] for h in hangs} == {"collective_correctness"}
    dump = "\n".join(h["stack_dump"] for h in hangs)
    assert "check_correctness" in dump and "all_reduce" in dump  # where the live ranks wait
    assert "rank 2" in dump and "terminated by the launcher" in dump
    assert all(h["threshold"]["deadline_s"] == DEADLINE_S for h in hangs)
    ranks = {r["rank"]: r for r in out["ranks"]}
    assert ranks[2]["terminated"] and ranks[2]["returncode"] < 0
    assert "run_rank" in ranks[2]["stack_dump"]  # the never-joining rank's own stacks
    for r in ranks.values():
        with pytest.raises(ProcessLookupError):
            os.kill(r["pid"], 0)
    assert any(line.startswith("AXBGATE_HEALTH ") and '"HANG"' in line
               for line in proc.stdout.splitlines())
