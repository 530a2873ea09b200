"""What a real gate's run prints can fail that run, never the poller or the next gate; a
cancelled run keeps its steps; the run logs of a real gate download over HTTP.

Real parts: the `local` executor (submitit subprocess + allocation driver), the external
``--command`` fixture harness, SQLite and PostgreSQL ledgers, the FastAPI app.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate, Run, RunStep
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.settings import get_settings
from orchestrator.usecases import gates as use_cases
from tests.factories import harness_gate, open_ledger, submit

BAD = ("deep", "int70", "nan", "bigline", "badutf8", "nul")
REASONS = {"deep": "deeper than 64", "int70": "64-bit", "nan": "slowest_rank_step_s must be a positive finite number of seconds, got nan",
           "bigline": "limit is 1048576 bytes", "badutf8": "not valid UTF-8", "nul": "NUL"}


@pytest.fixture
def ledger(db_url, monkeypatch):
    """The test's ledger on ``db_url`` (SQLite file or PostgreSQL), gates on `local`."""
    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    get_settings.cache_clear()
    engine, settings = open_ledger()
    yield engine, settings
    engine.dispose()


def _until_all_done(engine, settings, gate_ids, timeout_s=240.0) -> dict[int, Gate]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dispatch_pass(engine, settings, gate_ids=gate_ids)
        poll_pass(engine, settings, gate_ids=gate_ids)
        with Session(engine, expire_on_commit=False) as session:
            gates = {g.id: g for g in session.scalars(select(Gate).where(Gate.id.in_(gate_ids)))}
        if all(g.status in ("succeeded", "failed", "cancelled") for g in gates.values()):
            return gates
        time.sleep(0.5)
    raise AssertionError(f"gates did not finish: {[(g.id, g.status) for g in gates.values()]}")


def test_bad_record_fails_its_run_naming_the_line_and_the_next_gate_runs(ledger):
    engine, settings = ledger
    ids = []
    for fault in BAD:
        gate_in = harness_gate(title=f"bad {fault}")
        gate_in.control.env["HARNESS_FAULT"] = f"bad-{fault}"
        ids.append(submit(engine, gate_in))
    good = submit(engine, harness_gate(control_ms=50.0, candidate_ms=50.0))
    gates = _until_all_done(engine, settings, [*ids, good])
    with Session(engine) as session:
        for fault, gate_id in zip(BAD, ids, strict=True):
            gate = gates[gate_id]
            assert gate.status == "failed", (fault, gate.status, gate.status_reason)
            # Line 1 of runs/00-A.log is the driver's header, then the provenance, steps 0
            # and 1: the bad record is line 5 of the file.
            assert "runs/00-A.log: line 5" in gate.status_reason, (fault, gate.status_reason)
            assert REASONS[fault] in gate.status_reason, (fault, gate.status_reason)
            runs = list(session.scalars(select(Run).where(Run.gate_id == gate_id).order_by(Run.order)))
            assert [(r.role, r.status) for r in runs] == [("A", "failed"), ("X", "skipped"), ("B", "skipped")]
            assert "line 5" in runs[0].error
            # What the run printed before and after the bad line was kept.
            steps = list(session.scalars(select(RunStep.step).where(RunStep.run_id == runs[0].id)))
            assert sorted(steps) == list(range(7)), (fault, steps)
    assert gates[good].status == "succeeded", gates[good].status_reason


def test_cancelled_run_keeps_the_steps_it_printed(ledger):
    engine, settings = ledger
    gate_in = harness_gate(run_timeout_s=600, warmup_steps=2, measured_steps=400)
    gate_in.control.env["HARNESS_SLEEP_S"] = "0.1"
    gate_in.control.env["HARNESS_FAULT"] = "linger"  # prints 5 more steps after SIGTERM
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    log = settings.data_dir / "gates" / f"{gate_id:06d}" / "runs" / "00-A.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().count("AXBGATE_STEP") >= 15):
        assert time.monotonic() < deadline, "the run printed no steps"
        time.sleep(0.2)
    with Session(engine) as session:
        use_cases.cancel_gate(session=session, gate_id=gate_id, reason="test cancel")
        session.commit()
    folder = log.parent.parent
    deadline = time.monotonic() + 60
    while not (folder / "steps-collected").exists():
        assert time.monotonic() < deadline, "the cancelled gate's steps were never collected"
        poll_pass(engine, settings, gate_ids=[gate_id])
        time.sleep(0.3)
    printed = [json.loads(line.split(" ", 1)[1])["step"] for line in log.read_text().splitlines()
               if line.startswith("AXBGATE_STEP ")]
    assert len(printed) >= 15 and json.loads((folder / "status.json").read_text())["state"] == "cancelled"
    with Session(engine) as session:
        run = session.scalars(select(Run).where(Run.gate_id == gate_id, Run.order == 0)).one()
        stored = list(session.scalars(select(RunStep.step).where(RunStep.run_id == run.id).order_by(RunStep.step)))
        assert run.status == "cancelled"
    assert stored == printed


def test_run_logs_of_a_local_gate_download_over_http(ledger, tmp_path):
    from orchestrator.app.api import create_app
    from orchestrator.settings import Settings

    engine, settings = ledger
    gate_id = submit(engine, harness_gate(control_ms=20.0, candidate_ms=20.0, health=True))
    gate = _until_all_done(engine, settings, [gate_id])[gate_id]
    assert gate.status == "succeeded", gate.status_reason
    app_settings = Settings(data_dir=settings.data_dir, database={"url": settings.database_url},
                            gates={"enabled": False}, nightly={"enabled": False})
    with TestClient(create_app(app_settings)) as client:
        view = client.get(f"/gates/{gate_id}").json()
        for run in view["runs"]:
            [art] = [a for a in run["artifacts"] if a["kind"] == "log"]
            resp = client.get(art["log_url"])
            assert resp.status_code == 200, resp.text
            path = settings.data_dir / "gates" / f"{gate_id:06d}" / "runs" / f"{run['order']:02d}-{run['role']}.log"
            assert resp.content == path.read_bytes()
            assert hashlib.sha256(resp.content).hexdigest() == art["sha256"] == resp.headers["x-content-sha256"]
            assert b"AXBGATE_STEP" in resp.content
            assert client.get(f"/runs/{run['id']}/log").status_code == 200


def test_ctrl_c_of_axbgate_gate_keeps_the_steps_printed(tmp_path):
    """The CLI's Ctrl-C cancels the gate and waits until the steps its run printed are stored."""
    import os
    import signal
    import subprocess
    import sys

    from tests.factories import HARNESS

    settings = get_settings()
    argv = [str(Path(sys.executable).parent / "axbgate"), "gate", "--command",
            json.dumps([sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}"]),
            "--control-env", "HARNESS_STEP_MS=10", "--control-env", "HARNESS_SLEEP_S=0.1",
            "--control-env", "HARNESS_FAULT=linger",
            "--candidate-env", "HARNESS_STEP_MS=10", "--warmup-steps", "2", "--measured-steps", "400",
            "--no-health", "--run-timeout-s", "600", "--executor", "local"]
    proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    log = settings.data_dir / "gates" / "000001" / "runs" / "00-A.log"
    try:
        deadline = time.monotonic() + 90
        while not (log.exists() and log.read_text().count("AXBGATE_STEP") >= 15):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed = [json.loads(line.split(" ", 1)[1])["step"] for line in log.read_text().splitlines()
               if line.startswith("AXBGATE_STEP ")]
    engine, _ = open_ledger()
    with Session(engine) as session:
        run = session.scalars(select(Run).where(Run.gate_id == 1, Run.order == 0)).one()
        stored = list(session.scalars(select(RunStep.step).where(RunStep.run_id == run.id).order_by(RunStep.step)))
        assert session.get(Gate, 1).status == "cancelled", err.decode()[-2000:]
    engine.dispose()
    assert len(printed) >= 15 and stored == printed


def test_kill_int_cancels_a_gate_started_with_sigint_ignored(tmp_path):
    """A non-interactive shell starts background jobs with SIGINT ignored (``axbgate gate ...
    &`` in a script); ``kill -INT`` must still cancel the gate, and the CLI exit (issue 25)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.factories import HARNESS

    settings = get_settings()
    argv = [str(Path(sys.executable).parent / "axbgate"), "gate", "--command",
            json.dumps([sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}"]),
            "--control-env", "HARNESS_STEP_MS=10", "--candidate-env", "HARNESS_STEP_MS=10",
            "--warmup-steps", "2", "--measured-steps", "2000", "--no-health",
            "--run-timeout-s", "600", "--executor", "local"]
    proc = subprocess.Popen(argv, env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    log = settings.data_dir / "gates" / "000001" / "runs" / "00-A.log"
    try:
        deadline = time.monotonic() + 90
        while not (log.exists() and log.read_text().count("AXBGATE_STEP") >= 5):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 90
        while proc.poll() is None:
            assert time.monotonic() < deadline, "axbgate gate ignored SIGINT"
            time.sleep(0.2)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    engine, _ = open_ledger()
    with Session(engine) as session:
        gate = session.get(Gate, 1)
        assert gate.status == "cancelled", err[-2000:]
        assert gate.status_reason == "cancelled from the CLI (Ctrl-C (SIGINT))"
    engine.dispose()
