"""Whole gates through the REAL `slurm` executor (sbatch via submitit, slurmdbd accounting).

Needs the single-node cluster of scripts/slurm_up.sh (CI brings it up). On 2 CPUs Slurm
jobs serialize, so these run one at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Allocation, Gate, Run, RunStep, Verdict
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.settings import get_settings
from orchestrator.usecases import gates as use_cases
from tests.factories import harness_gate, make_harness_repo, open_ledger, submit

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _slurm_up() -> bool:
    if shutil.which("sbatch") is None:
        return False
    out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return "UP" in out.stdout


@pytest.fixture
def ledger():
    if not _slurm_up():
        if os.environ.get("CI"):
            pytest.fail("Slurm is not up in CI: scripts/slurm_up.sh should have started it")
        pytest.skip("Slurm is not up (run scripts/slurm_up.sh as root)")
    engine, settings = open_ledger()
    yield engine, settings
    engine.dispose()


_submit = submit


def _wait(engine, settings, gate_id, timeout_s=300.0, until=("succeeded", "failed", "cancelled")):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine, expire_on_commit=False) as session:
            gate = session.get(Gate, gate_id)
            if gate.status in until:
                return gate
        time.sleep(1.0)
    raise AssertionError(f"gate {gate_id} still {gate.status} after {timeout_s} s")


def _sacct_state(job_id: str) -> str:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id],
                         capture_output=True, text=True, check=False).stdout.split()
    return out[0] if out else ""


def _wait_sacct_state(job_id: str, wanted: str, timeout_s: float = 60.0) -> str:
    """Poll sacct until the job reaches ``wanted`` (the batch step's epilogue and slurmdbd's
    record can lag the gate's own end by seconds) or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    state = _sacct_state(job_id)
    while state != wanted and time.monotonic() < deadline:
        time.sleep(1)
        state = _sacct_state(job_id)
    return state


def test_trainer_gate_env_override_two_tasks(ledger, wall_time_report):
    """Tiny CPU recipe, 2 tasks via srun, candidate = environment override, health first."""
    engine, settings = ledger
    gate_in = use_cases.GateCreate.model_validate({
        "title": "slurm tiny env override",
        "workload": {"recipe": "tiny"},
        "candidate": {"env": {"OMP_NUM_THREADS": "1"}},
        "warmup_steps": 2, "measured_steps": 4,
        "executor": "slurm",
        "topology": {"ntasks_per_node": 2, "time_limit_min": 10},
        "run_timeout_s": 240,
        "policy": "drift",
    })
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id, timeout_s=600)
    assert gate.status == "succeeded", gate.status_reason
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        runs = sorted(gate.runs, key=lambda r: r.order)
        assert [r.status for r in runs] == ["succeeded"] * 3
        assert all(r.world_size == 2 and r.median_step_s > 0 for r in runs)
        assert all(any("srun" in str(a) for a in r.command) for r in runs)
        alloc = session.get(Allocation, gate.allocation_id)
        assert alloc.scheduler_job_id == gate.job_ref and alloc.health_verdict == "healthy"
        assert session.scalars(select(Verdict).where(Verdict.gate_id == gate_id)).first() is not None
    assert _wait_sacct_state(gate.job_ref, "COMPLETED") == "COMPLETED"
    with Session(engine) as session:
        report = use_cases.gate_overhead(session=session, gate_id=gate_id, data_dir=settings.data_dir)
    assert 0 < report["measured_s"] < report["runs_wall_s"] < report["allocation_wall_s"]
    wall_time_report(
        f"slurm, tiny recipe, 2 tasks, 2+4 steps: allocation {report['allocation_wall_s']:.1f} s, "
        f"measured steps {report['measured_s']:.2f} s, health {report['health_s']:.1f} s, "
        f"overhead {report['overhead_pct']:.1f}% (CPU compile/launch dominate; GPU gate: "
        "benchmarks/results/gate_h200x2_2026-11-30)")


def test_two_commits_external_harness(ledger, tmp_path):
    engine, settings = ledger
    repo, shas = make_harness_repo(tmp_path, [100.0, 100.0])
    gate_in = harness_gate(
        executor="slurm",
        workload={"command": [sys.executable, "{source_dir}/harness.py", "{warmup_steps}", "{measured_steps}"]},
        control={"source": {"repo": str(repo), "ref": "HEAD~1"}},
        candidate={"source": {"repo": str(repo), "ref": "HEAD"}},
        topology={"ntasks_per_node": 1, "time_limit_min": 5},
        kind="regate",
    )
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    with Session(engine) as session:
        runs = sorted(session.get(Gate, gate_id).runs, key=lambda r: r.order)
        assert [r.source_sha for r in runs] == [shas[0], shas[1], shas[0]]
        verdict = session.scalars(select(Verdict).where(Verdict.gate_id == gate_id,
                                                       Verdict.is_primary.is_(True))).one()
        assert verdict.verdict == "pass"


def test_scancel_of_running_gate(ledger):
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm", topology={"ntasks_per_node": 1, "time_limit_min": 5},
                           run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "hang"
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    _wait(engine, settings, gate_id, until=("running",), timeout_s=120)
    with Session(engine) as session:
        job = session.get(Gate, gate_id).job_ref
        use_cases.cancel_gate(session=session, gate_id=gate_id)
        session.commit()
    poll_pass(engine, settings, gate_ids=[gate_id])  # sends scancel
    deadline = time.monotonic() + 120
    while _sacct_state(job) not in ("CANCELLED", "CANCELLED+"):
        assert time.monotonic() < deadline, _sacct_state(job)
        time.sleep(1)
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        assert gate.status == "cancelled"
        assert {r.status for r in gate.runs} == {"cancelled"}


def test_time_limit_fails_the_gate(ledger):
    """time_limit_min=2: submitit's USR2 warning (90 s before) reaches the driver."""
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm", topology={"ntasks_per_node": 1, "time_limit_min": 2},
                           run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "hang"
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id, timeout_s=240)
    assert gate.status == "failed"
    assert "time limit" in gate.status_reason or "TIMEOUT" in gate.status_reason


def test_job_that_never_starts_misses_queue_deadline(ledger):
    engine, settings = ledger
    gate_in = harness_gate(executor="slurm",
                           topology={"ntasks_per_node": 1, "time_limit_min": 5, "queue_deadline_s": 5,
                                     "extra_slurm": {"begin": "now+3600"}})
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    with Session(engine) as session:
        job = session.get(Gate, gate_id).job_ref
    assert subprocess.run(["squeue", "-h", "-o", "%T", "-j", job], capture_output=True,
                          text=True).stdout.strip() == "PENDING"
    time.sleep(6)
    gate = _wait(engine, settings, gate_id, timeout_s=60)
    assert gate.status == "failed" and "queue deadline" in gate.status_reason
    deadline = time.monotonic() + 60
    while _sacct_state(job) not in ("CANCELLED", "CANCELLED+"):
        assert time.monotonic() < deadline, _sacct_state(job)
        time.sleep(1)


def test_service_restart_while_gate_runs(ledger):
    engine, settings = ledger
    gate_id = _submit(engine, harness_gate(executor="slurm", topology={"ntasks_per_node": 1,
                                                                      "time_limit_min": 5}))
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    _wait(engine, settings, gate_id, until=("running", "succeeded"), timeout_s=120)
    engine.dispose()
    get_settings.cache_clear()
    engine2 = create_engine(get_settings().database_url)
    gate = _wait(engine2, get_settings(), gate_id)
    poll_pass(engine2, get_settings(), gate_ids=[gate_id])
    assert gate.status == "succeeded", gate.status_reason
    with Session(engine2) as session:
        assert len(list(session.scalars(select(RunStep).join(Run).where(Run.gate_id == gate_id)))) == 21
        assert len(list(session.scalars(select(Verdict).where(Verdict.gate_id == gate_id)))) == 3  # sequential, drift and ratio-ci side by side
    engine2.dispose()

