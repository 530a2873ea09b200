"""Whole A/X/B gates through the real `local` executor (submitit subprocess + driver)."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Allocation, Artifact, Gate, HealthCheck, Run, RunStep, Verdict
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.settings import get_settings
from orchestrator.usecases import gates as use_cases
from tests.factories import harness_gate, make_harness_repo, open_ledger, submit, wait_for_gate


@pytest.fixture
def ledger():
    engine, settings = open_ledger()
    yield engine, settings
    engine.dispose()


_submit = submit


def _run_to_end(engine, settings, gate_id: int, timeout_s: float = 120.0):
    return wait_for_gate(engine, settings, gate_id, timeout_s=timeout_s, dispatch=True)


def _runs(engine, gate_id):
    with Session(engine) as session:
        return [(r.role, r.status, r.median_step_s, r.error)
                for r in session.scalars(select(Run).where(Run.gate_id == gate_id).order_by(Run.order))]


def test_env_override_gate_accepts_faster_candidate(ledger):
    engine, settings = ledger
    gate_id = _submit(engine, harness_gate(control_ms=100.0, candidate_ms=95.0, health=True))
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    runs = _runs(engine, gate_id)
    assert [r[:2] for r in runs] == [("A", "succeeded"), ("X", "succeeded"), ("B", "succeeded")]
    # Harness median of measured steps 2..6 with the fixed jitter: 100 ms x (1 + 0.0002) etc.
    assert runs[0][2] == pytest.approx(0.1, rel=5e-4)
    assert runs[1][2] == pytest.approx(0.095, rel=5e-4)
    with Session(engine) as session:
        verdict = session.scalars(select(Verdict).where(Verdict.gate_id == gate_id,
                                                       Verdict.is_primary.is_(True))).one()
        assert verdict.verdict == "accept" and verdict.policy == "drift"
        assert verdict.numbers["delta_pct"] == pytest.approx(-5.0, abs=0.1)
        steps = list(session.scalars(select(RunStep).join(Run).where(Run.gate_id == gate_id)))
        assert len(steps) == 3 * 7
        logs = list(session.scalars(select(Artifact).where(Artifact.gate_id == gate_id,
                                                           Artifact.kind == "log")))
        assert len(logs) == 3
        for art in logs:
            assert hashlib.sha256(Path(art.path).read_bytes()).hexdigest() == art.sha256
        alloc = session.get(Allocation, session.get(Gate, gate_id).allocation_id)
        assert alloc.health_verdict == "healthy"
        checks = list(session.scalars(select(HealthCheck).where(HealthCheck.allocation_id == alloc.id)))
        assert checks and all(c.status in ("PASS", "WARN") for c in checks)
        assert {r.allocation_id for r in session.get(Gate, gate_id).runs} == {alloc.id}
    report = None
    with Session(engine) as session:
        report = use_cases.gate_overhead(session=session, gate_id=gate_id, data_dir=settings.data_dir)
    assert report["measured_s"] == pytest.approx(5 * 0.1 + 5 * 0.095 + 5 * 0.1, rel=1e-3)
    assert 0 < report["overhead_pct"] < 100


@pytest.mark.parametrize(
    "fault, fragment",
    [("crash", "exited with status 3"), ("oom", "exited with status 1 (out of memory)"),
     ("nan", "non-finite loss"),
     ("short", "finished 6 of 7 steps"), ("garbage", "malformed record")],
)
def test_failing_candidate_fails_gate_and_keeps_earlier_runs(ledger, fault, fragment):
    engine, settings = ledger
    gate_in = harness_gate()
    gate_in.candidate.env["HARNESS_FAULT"] = fault
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "failed"
    assert fragment in gate.status_reason
    runs = _runs(engine, gate_id)
    assert runs[0][1] == "succeeded" and runs[0][2] == pytest.approx(0.1, rel=5e-4)
    assert runs[1][1] == "failed" and fragment in runs[1][3]
    assert runs[2][1] == "skipped"
    with Session(engine) as session:
        assert list(session.scalars(select(Verdict).where(Verdict.gate_id == gate_id))) == []


def test_hanging_run_hits_its_deadline(ledger):
    engine, settings = ledger
    gate_in = harness_gate(run_timeout_s=3)
    gate_in.candidate.env["HARNESS_FAULT"] = "hang"
    gate_id = _submit(engine, gate_in)
    start = time.monotonic()
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "failed" and "deadline of 3 s" in gate.status_reason
    assert time.monotonic() - start < 60


def test_two_commits_of_a_git_repository(ledger, tmp_path):
    engine, settings = ledger
    repo, shas = make_harness_repo(tmp_path, [100.0, 110.0])
    gate_in = harness_gate(
        workload={"command": [sys.executable, "{source_dir}/harness.py", "{warmup_steps}", "{measured_steps}"]},
        control={"source": {"repo": str(repo), "ref": "HEAD~1"}},
        candidate={"source": {"repo": str(repo), "ref": "main"}},
    )
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    with Session(engine) as session:
        runs = sorted(session.get(Gate, gate_id).runs, key=lambda r: r.order)
        assert [r.source_sha for r in runs] == [shas[0], shas[1], shas[0]]
        assert runs[1].median_step_s == pytest.approx(0.110, rel=5e-4)
        verdict = session.scalars(select(Verdict).where(Verdict.gate_id == gate_id,
                                                       Verdict.is_primary.is_(True))).one()
        assert verdict.verdict == "reject"


def test_cancel_stops_the_job(ledger):
    engine, settings = ledger
    gate_in = harness_gate(run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "hang"
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    folder = settings.data_dir / "gates" / f"{gate_id:06d}"
    deadline = time.monotonic() + 30
    while not (folder / "runs" / "00-A.started.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    with Session(engine) as session:
        use_cases.cancel_gate(session=session, gate_id=gate_id)
        session.commit()
    poll_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + 30
    import json

    while True:
        status = json.loads((folder / "status.json").read_text())
        if status["state"] == "cancelled":
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.3)
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        assert gate.status == "cancelled"
        assert {r.status for r in gate.runs} == {"cancelled"}


def test_restarted_service_reattaches_and_records_once(ledger):
    engine, settings = ledger
    gate_id = _submit(engine, harness_gate(control_ms=50.0, candidate_ms=50.0))
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    poll_pass(engine, settings, gate_ids=[gate_id])
    engine.dispose()
    get_settings.cache_clear()
    engine2 = create_engine(get_settings().database_url)  # "restarted" service
    gate = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        poll_pass(engine2, get_settings(), gate_ids=[gate_id])
        poll_pass(engine2, get_settings(), gate_ids=[gate_id])  # a duplicate pass adds nothing
        with Session(engine2) as session:
            gate = session.get(Gate, gate_id)
            if gate.status == "succeeded":
                break
        time.sleep(0.5)
    with Session(engine2) as session:
        assert session.get(Gate, gate_id).status == "succeeded"
        assert len(list(session.scalars(select(Run).where(Run.gate_id == gate_id)))) == 3
        assert len(list(session.scalars(select(RunStep).join(Run).where(Run.gate_id == gate_id)))) == 21
        verdicts = list(session.scalars(select(Verdict).where(Verdict.gate_id == gate_id)))
        assert sorted(v.policy for v in verdicts) == ["drift", "ratio-ci", "sequential"]
        assert [v.policy for v in verdicts if v.is_primary] == ["drift"]
    engine2.dispose()


def test_health_failure_means_no_runs(ledger):
    engine, settings = ledger
    gate_in = harness_gate(health=True)
    gate_in.health.criteria = str(Path(__file__).resolve().parents[1] / "fixtures" / "criteria-impossible.toml")
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "failed" and "health" in gate.status_reason
    assert {r[1] for r in _runs(engine, gate_id)} == {"skipped"}
    with Session(engine) as session:
        alloc = session.get(Allocation, session.get(Gate, gate_id).allocation_id)
        assert alloc.health_verdict == "failed"


def test_auto_extend_appends_x_b_while_inconclusive(ledger):
    engine, settings = ledger
    from tests.factories import HARNESS

    gate_in = harness_gate(
        workload={"command": [sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}",
                              "{run_index}"]},
        max_extend=1,
    )
    gate_in.control.env["HARNESS_DRIFT_PCT"] = "3"  # A and B 6% apart: drift > max_drift
    gate_in.candidate.env["HARNESS_DRIFT_PCT"] = "3"
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    runs = _runs(engine, gate_id)
    assert [r[0] for r in runs] == ["A", "X", "B", "X", "B"]
    assert all(r[1] == "succeeded" for r in runs)
    assert runs[4][2] == pytest.approx(0.1 * 1.12, rel=1e-3)  # run index 4: +12%
    with Session(engine) as session:
        verdict = session.scalars(select(Verdict).where(Verdict.gate_id == gate_id,
                                                       Verdict.policy == "drift")).one()
        assert verdict.verdict == "inconclusive" and verdict.numbers["num_runs"] == 5


def test_progress_is_visible_before_the_gate_ends(ledger):
    engine, settings = ledger
    gate_in = harness_gate()
    for side in (gate_in.control, gate_in.candidate):
        side.env["HARNESS_SLEEP_S"] = "0.4"
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and seen is None:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = session.get(Gate, gate_id)
            for run in gate.runs:
                if gate.status == "running" and run.status == "running" and 0 < len(run.steps) < 7:
                    seen = (run.role, len(run.steps))
        time.sleep(0.3)
    assert seen is not None, "no partial run progress was ingested while the gate ran"
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded"


@pytest.mark.slow
def test_trainer_gate_local_with_health(ledger, wall_time_report):
    """The bundled trainer (tiny recipe, 2 gloo ranks via torchrun) after the CPU health gate."""
    engine, settings = ledger
    gate_in = use_cases.GateCreate.model_validate({
        "title": "tiny packed qkv", "workload": {"recipe": "tiny"},
        "candidate": {"recipe_overrides": ["model.packed_qkv=true"]},
        "warmup_steps": 2, "measured_steps": 4, "executor": "local", "run_timeout_s": 300,
        "policy": "drift",
    })
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id, timeout_s=600)
    assert gate.status == "succeeded", gate.status_reason
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        runs = sorted(gate.runs, key=lambda r: r.order)
        assert all(r.world_size == 2 and r.local_batch_size == 2 and r.median_step_s > 0 for r in runs)
        # local bundled-trainer runs are forked from the allocation's fork server
        assert runs[0].command[0] == "(fork server)" and "trainer" in runs[0].command
        assert "model.packed_qkv=true" in runs[1].command and "model.packed_qkv=true" not in runs[0].command
        assert gate.recipe["model"]["num_layers"] == 2 and gate.candidate_spec["recipe"]["model"]["packed_qkv"]
        assert session.get(Allocation, gate.allocation_id).health_verdict == "healthy"
        report = use_cases.gate_overhead(session=session, gate_id=gate_id, data_dir=settings.data_dir)
        # Semantics (issue 19): packed QKV is the same math. Summation order may move the
        # FP32 values by ~1e-7 relative (within tolerance; bitwise equal on some CPUs), the
        # controls are bitwise equal (floor recorded) and the timing verdict stands.
        sem = gate.semantic_verdicts[-1]
        primary = next(v for v in gate.verdicts if v.is_primary)
        assert sem.status in ("within tolerance", "equal"), sem.numbers["reason"]
        assert sem.decision == primary.verdict == sem.timing_verdict
        floor = sem.numbers["floor"]
        assert floor["deterministic"] is True and floor["num_steps_compared"] == 6
        assert floor["loss_tolerance_rel"] == floor["grad_norm_tolerance_rel"] == 1e-4
        assert all(c[f"max_{q}_deviation_rel"] < 1e-5 for c in sem.numbers["copies"]
                   for q in ("loss", "grad_norm"))
        assert runs[1].semantics["dtypes"]["fp32_coverage"] == 1.0
        assert runs[1].semantics["probe"]["step"] == 0 and runs[1].semantics["samples_per_step"] == 4
    wall_time_report(
        f"local, tiny recipe, 2 gloo ranks, 2+4 steps: allocation {report['allocation_wall_s']:.1f} s, "
        f"measured steps {report['measured_s']:.2f} s, health {report['health_s']:.1f} s, "
        f"overhead {report['overhead_pct']:.1f}%")


def _group_alive(pgid: int) -> bool:
    import os

    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_processes_left_by_a_step_are_killed(ledger):
    import os

    engine, settings = ledger
    gate_in = harness_gate()
    gate_in.candidate.env["HARNESS_FAULT"] = "fork"
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    # The run's working directory is its own output folder (no source checkout here).
    from orchestrator.executors.plan import GatePaths

    child = int((GatePaths.of(settings.data_dir, gate_id).run_out(1, "X") / "fork-child.pid").read_text())
    with Session(engine) as session:
        run = session.scalars(select(Run).where(Run.gate_id == gate_id, Run.order == 1)).one()
        leftovers = run.result_extra["leftovers"]
    # The forked helper kept the step's process group: still a leftover, listed and killed.
    assert leftovers["count"] == 1 and leftovers["processes"][0]["pid"] == child, leftovers
    deadline = time.monotonic() + 10
    while True:  # killed with the step's process group (it may linger as a zombie briefly)
        try:
            os.kill(child, 0)
            state = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError):
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, f"forked helper {child} outlived its run"
        time.sleep(0.2)


def test_cancel_kills_a_step_that_ignores_sigterm(ledger):
    engine, settings = ledger
    gate_in = harness_gate(run_timeout_s=600)
    gate_in.control.env["HARNESS_FAULT"] = "stubborn"
    gate_id = _submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    folder = settings.data_dir / "gates" / f"{gate_id:06d}"
    deadline = time.monotonic() + 30
    while not (folder / "active-step.pgid").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(1.0)
    pgid = int((folder / "active-step.pgid").read_text())
    assert _group_alive(pgid)
    with Session(engine) as session:
        use_cases.cancel_gate(session=session, gate_id=gate_id)
        session.commit()
    poll_pass(engine, settings, gate_ids=[gate_id])  # SIGTERM, grace, then SIGKILL the group
    deadline = time.monotonic() + 30
    while _group_alive(pgid):
        assert time.monotonic() < deadline, "the stubborn step survived the cancel"
        time.sleep(0.2)
    with Session(engine) as session:
        assert session.get(Gate, gate_id).status == "cancelled"


def test_one_local_gate_at_a_time_and_exactly_one_claim(ledger):
    from orchestrator.usecases.dispatch import claim_gate

    engine, settings = ledger
    first = _submit(engine, harness_gate())
    second = _submit(engine, harness_gate())
    with Session(engine) as s1, Session(engine) as s2:
        assert claim_gate(session=s1, gate_id=first) is True
        s1.commit()
        assert claim_gate(session=s2, gate_id=first) is False  # already claimed
        assert claim_gate(session=s2, gate_id=second) is False  # the machine is busy
        s2.rollback()
    with Session(engine) as session:
        assert session.get(Gate, second).status == "queued"


def test_failed_gate_accepts_only_reject_or_rerun_decisions(ledger):
    from orchestrator.domain.errors import ValidationFailed

    engine, settings = ledger
    gate_in = harness_gate()
    gate_in.candidate.env["HARNESS_FAULT"] = "crash"
    gate_id = _submit(engine, gate_in)
    assert _run_to_end(engine, settings, gate_id).status == "failed"
    with Session(engine) as session:
        with pytest.raises(ValidationFailed, match="only 'reject' or 'rerun'"):
            use_cases.record_decision(session=session, gate_id=gate_id, decided_by="qa",
                                      decision="accept", reason="looks fine")
        row = use_cases.record_decision(session=session, gate_id=gate_id, decided_by="qa",
                                        decision="rerun", reason="crashed in X")
        session.commit()
        assert row.decision == "rerun"


def test_run_flooding_its_log_is_killed_at_max_log_bytes(ledger):
    engine, settings = ledger
    gate_in = harness_gate(max_log_bytes=4 * 1024**2)
    gate_in.control.env["HARNESS_FAULT"] = "flood"
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "failed" and "max_log_bytes" in gate.status_reason
    log = settings.data_dir / "gates" / f"{gate_id:06d}" / "runs" / "00-A.log"
    assert 4 * 1024**2 < log.stat().st_size < 64 * 1024**2


def test_health_between_runs_when_asked(ledger):
    import json

    engine, settings = ledger
    gate_in = harness_gate(health=True)
    gate_in.health.between_runs = True
    gate_id = _submit(engine, gate_in)
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    folder = settings.data_dir / "gates" / f"{gate_id:06d}"
    verdicts = [json.loads((folder / name).read_text())["verdict"]
                for name in ("health.json", "health-01.json", "health-02.json")]
    assert verdicts == ["healthy"] * 3
    status = json.loads((folder / "status.json").read_text())
    phases = [t["phase"] for t in status["timeline"]]
    assert phases == ["health", "run", "health-01", "run", "health-02", "run"]
    ports = [p["master_port"] for p in status["preamble"]]
    assert len(set(ports)) == len(ports) == 6  # a fresh MASTER_PORT for every step
