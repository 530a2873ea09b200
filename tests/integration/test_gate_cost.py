"""Issue 14 on CPU: the trainer's steady-state warmup and time window, activation
checkpointing, the per-run timeline, and local recipe runs forked from the fork server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from sqlalchemy.orm import Session

from tests.factories import open_ledger, submit

pytestmark = pytest.mark.slow


def _train(*overrides: str) -> dict[str, dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "trainer", "train", "--recipe", "tiny", *overrides],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records: dict[str, dict] = {}
    steps = []
    for line in proc.stdout.splitlines():
        prefix, _, body = line.partition(" ")
        if prefix == "AXBGATE_STEP":
            steps.append(json.loads(body))
        elif prefix.startswith("AXBGATE_"):
            records[prefix] = json.loads(body)
    records["steps"] = {"list": steps}
    return records


def test_steady_warmup_and_time_window_size_the_run():
    out = _train("measure.warmup_mode=steady", "measure.warmup_steps=2",
                 "measure.max_warmup_steps=12", "measure.steady_tolerance_pct=50",
                 "measure.steady_window=3", "measure.measured_steps=3",
                 "measure.measured_seconds=0.5")
    timing = out["AXBGATE_TIMING"]
    warm, measured = timing["num_warmup_steps"], timing["num_measured_steps"]
    assert 3 <= warm <= 12                         # at least the window, at most the cap
    assert len(timing["slowest_rank_step_s"]) == warm + measured
    settled = timing["slowest_rank_step_s"][warm - 3:warm]
    assert max(settled) <= 1.5 * sorted(settled)[1]  # the rule really held when it stopped
    # The window filled about 0.5 s at the settled step time (at least 3 steps).
    assert measured >= 3
    assert sum(timing["slowest_rank_step_s"][warm:]) >= 0.5 * 0.5
    assert timing["warmup_rule"]["mode"] == "steady"
    phases = [s["phase"] for s in out["steps"]["list"]]
    assert phases == ["warmup"] * warm + ["measured"] * measured
    tl = out["AXBGATE_TIMELINE"]
    order = ["process_start_unix", "imports_done_unix", "main_start_unix", "process_group_ready_unix",
             "model_built_unix", "first_step_start_unix", "first_step_end_unix", "warmup_end_unix",
             "last_step_end_unix", "records_done_unix"]
    assert [tl[k] for k in order] == sorted(tl[k] for k in order)


def test_activation_checkpointing_trains_the_same_math():
    plain = _train("measure.warmup_steps=1", "measure.measured_steps=3")
    ac = _train("measure.warmup_steps=1", "measure.measured_steps=3",
                "parallel.activation_checkpointing=full")
    assert [s["loss"] for s in ac["steps"]["list"]] == pytest.approx(
        [s["loss"] for s in plain["steps"]["list"]], rel=1e-5)


def test_local_recipe_gate_runs_from_the_fork_server_and_reports_its_cost():
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases.gates import gate_overhead, get_gate
    from tests.factories import harness_gate

    engine, settings = open_ledger()
    gate_in = harness_gate(workload={"recipe": "tiny"}, control={}, candidate={},
                           warmup_steps=1, measured_steps=3, run_timeout_s=300,
                           topology={"ntasks_per_node": 1})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + 400
    while True:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = get_gate(session=session, gate_id=gate_id)
        if gate.status in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert gate.status == "succeeded", gate.status_reason
    assert all(r.command[0] == "(fork server)" for r in gate.runs), [r.command for r in gate.runs]
    with Session(engine) as session:
        report = gate_overhead(session=session, gate_id=gate_id, data_dir=settings.data_dir)
    assert report["num_runs"] == 3 and report["num_gpus"] == 0 and report["accelerator_s"] is None
    for run in report["per_run"]:
        # forked ranks import nothing; the run's fixed cost is launch->first step + teardown
        assert run["imports_s"] < 0.5
        assert run["fixed_s"] == pytest.approx(run["startup_s"] + run["teardown_s"])
        assert 0 < run["fixed_s"] < run["wall_s"]
    assert report["measured_s"] + report["warmup_s"] + report["fixed_s"] <= report["runs_wall_s"] + 0.5, json.dumps(report["per_run"])
    assert set(report["median_precision_pct"]) == {0, 1, 2}


def test_cancelling_a_forked_run_stops_every_process_of_the_gate():
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases.gates import cancel_gate, get_gate
    from tests.factories import harness_gate

    engine, settings = open_ledger()
    gate_in = harness_gate(workload={"recipe": "tiny"}, control={}, candidate={},
                           warmup_steps=1, measured_steps=400, run_timeout_s=600,
                           topology={"ntasks_per_node": 2})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate_dir = str(settings.data_dir / "gates" / f"{gate_id:06d}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # until run 0 has printed a step
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = get_gate(session=session, gate_id=gate_id)
        steps = (settings.data_dir / "gates" / f"{gate_id:06d}" / "runs" / "00-A.steps.jsonl")
        if steps.exists() and steps.read_text().count("\n") >= 2:
            break
        time.sleep(0.5)
    with Session(engine) as session:
        cancel_gate(session=session, gate_id=gate_id, reason="test cancel")
        session.commit()
    deadline = time.monotonic() + 120
    leftover = []
    while time.monotonic() < deadline:
        poll_pass(engine, settings, gate_ids=[gate_id])
        leftover = _processes_of(gate_dir)
        if not leftover:
            break
        time.sleep(0.5)
    assert leftover == []
    with Session(engine) as session:
        gate = get_gate(session=session, gate_id=gate_id)
    assert gate.status == "cancelled"


def _processes_of(gate_dir: str) -> list[int]:
    """Pids of trainer processes whose environment names the gate folder (/proc)."""
    from pathlib import Path

    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"trainer" in cmdline and gate_dir.encode() in environ:
            found.append(int(proc.name))
    return found
