"""Faults of issue 24, point 6, against the real parts: a claim whose dispatcher died
before the plan, a full disk under the log pump (a tmpfs this test mounts), and a poller
error that repeats every pass (logged once, with a count). Plus the subreaper path of
step containment, with real processes."""

from __future__ import annotations

import datetime as dt
import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate, Run
from orchestrator.executors.plan import GatePaths
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.settings import get_settings
from tests.factories import harness_gate, submit, wait_for_gate


@pytest.fixture
def ledger(db_url, monkeypatch):
    """The test's ledger on ``db_url`` (SQLite file or PostgreSQL)."""
    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    get_settings.cache_clear()
    engine = create_engine(db_url)
    yield engine, get_settings()
    engine.dispose()


def _wait(engine, settings, gate_id: int, timeout_s: float = 120.0):
    return wait_for_gate(engine, settings, gate_id, timeout_s=timeout_s, dispatch=False)


def test_claim_without_plan_returns_to_queued(ledger):
    """A dispatcher that died between its claim and the plan leaves the gate submitted with
    neither plan nor job: the next poll pass queues it again (nothing ran), the local queue
    is free, and the gate then runs to its end. A dispatcher still holding such a claim
    after the requeue submits nothing."""
    from orchestrator.runtime.gates import _Executors
    from orchestrator.usecases.dispatch import claim_gate, dispatch_gate

    engine, settings = ledger
    gate_id = submit(engine, harness_gate(control_ms=20.0, candidate_ms=20.0))
    with Session(engine) as session:  # the crashed dispatcher's claim, a minute old
        assert claim_gate(session=session, gate_id=gate_id)
        session.get(Gate, gate_id).submitted_at = (dt.datetime.now(dt.timezone.utc)
                                                   - dt.timedelta(seconds=60))
        session.commit()
    other = submit(engine, harness_gate(control_ms=20.0, candidate_ms=20.0))
    assert dispatch_pass(engine, settings, gate_ids=[other]) == 0  # the claim blocks the local queue
    assert poll_pass(engine, settings, gate_ids=[gate_id]) == 1
    with Session(engine) as session:
        gate = session.get(Gate, gate_id)
        assert (gate.status, gate.job_ref, gate.submitted_at) == ("queued", None, None)
        assert "queued again" in gate.status_reason
        assert [r.status for r in gate.runs] == ["pending"] * 3
    paths = GatePaths.of(settings.data_dir, gate_id)
    assert not paths.plan.exists()
    # A dispatcher that claimed, lost the claim to the requeue, and goes on: no submission.
    with Session(engine) as session:
        assert claim_gate(session=session, gate_id=gate_id)
        session.get(Gate, gate_id).submitted_at = (dt.datetime.now(dt.timezone.utc)
                                                   - dt.timedelta(seconds=60))
        session.commit()
    poll_pass(engine, settings, gate_ids=[gate_id])
    with Session(engine) as session:
        late = dispatch_gate(session=session, gate_id=gate_id, executors=_Executors(settings).get,
                             data_dir=settings.data_dir)
        session.commit()
        assert (late.status, late.job_ref) == ("queued", None)
    assert not paths.plan.exists()
    assert dispatch_pass(engine, settings, gate_ids=[gate_id]) == 1
    gate = _wait(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason


@pytest.fixture
def small_disk(tmp_path):
    """Mounts a 3 MiB tmpfs on demand; unmounts it afterwards."""
    mounted: list[Path] = []

    def mount(where: Path) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0755", "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip()}); needs CAP_SYS_ADMIN")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")
def test_full_disk_fails_the_run_at_once(ledger, small_disk):
    """The candidate floods its log until the gate folder's disk (a 3 MiB tmpfs) is full:
    the run fails at once with "disk full writing runs/01-X.log", its process is killed
    (not left in write() until its 10 min deadline), and the gate says so."""
    engine, settings = ledger
    gate_in = harness_gate(run_timeout_s=600)
    gate_in.candidate.env["HARNESS_FAULT"] = "flood"
    gate_id = submit(engine, gate_in)
    small_disk(GatePaths.of(settings.data_dir, gate_id).root)
    start = time.monotonic()
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    gate = _wait(engine, settings, gate_id, timeout_s=120)
    took = time.monotonic() - start
    print(f"gate {gate.status} in {took:.1f} s: {gate.status_reason}")
    assert gate.status == "failed"
    assert "disk full writing runs/01-X.log" in gate.status_reason
    assert took < 60
    with Session(engine) as session:
        runs = list(session.scalars(select(Run).where(Run.gate_id == gate_id).order_by(Run.order)))
        assert [r.status for r in runs] == ["succeeded", "failed", "skipped"]
        assert runs[1].error.startswith("disk full writing runs/01-X.log (No space left on device)")
    # The candidate's process worked in its own folder: none is left there.
    folder = str(GatePaths.of(settings.data_dir, gate_id).run_out(1, "X"))
    assert _working_in(folder) == [], f"the flooding run is still running in {folder}"


def _working_in(folder: str) -> list[int]:
    """Pids whose working directory is ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == folder:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_repeated_poller_error_is_logged_once_with_a_count(tmp_path, caplog):
    """The ledger is unreachable for several real passes of the poller: one ERROR with the
    traceback, no more; once the ledger is back, one line with the count."""
    from orchestrator.db.migrate import upgrade
    from orchestrator.runtime.gates import Poller

    missing = tmp_path / "not-yet"
    url = f"sqlite:///{missing / 'ledger.db'}"
    engine = create_engine(url)
    poller = Poller(engine, get_settings(), loop_seconds=0.05)
    caplog.set_level(logging.INFO, logger="orchestrator.runtime.loop")
    passes = []
    real = poller.run_once
    poller.run_once = lambda: (passes.append(time.monotonic()), real())[1]
    poller.start()
    try:
        deadline = time.monotonic() + 30
        while len(passes) < 8:
            assert time.monotonic() < deadline, "the poller did not pass 8 times in 30 s"
            time.sleep(0.05)
        ready = tmp_path / "ready.db"  # migrated aside, then moved in at once: one error only
        upgrade(f"sqlite:///{ready}")
        with sqlite3.connect(ready) as conn:
            conn.execute("PRAGMA journal_mode=DELETE")  # everything in the one file
        missing.mkdir()
        ready.rename(missing / "ledger.db")
        seen = len(passes)
        deadline = time.monotonic() + 30
        while len(passes) < seen + 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        poller.stop()
        engine.dispose()
    records = [r for r in caplog.records if r.name == "orchestrator.runtime.loop"]
    errors = [r for r in records if r.levelno >= logging.ERROR]
    print([r.getMessage()[:120] for r in records])
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "service=poller pass failed: OperationalError" in errors[0].getMessage()
    assert errors[0].exc_info is not None
    summary = [r.getMessage() for r in records if "repeated" in r.getMessage()]
    assert len(summary) == 1, summary
    count = int(summary[0].split(" repeated ")[1].split()[0])
    assert count >= 8 and count <= seen, (count, seen)


def test_subreaper_kills_a_setsid_grandchild(tmp_path):
    """Without a cgroup the driver is the subreaper of its steps: a grandchild that left
    the step's session and lost its parent is found, listed and killed."""
    from orchestrator.executors.driver.process import run_step

    script = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
              "'import time; time.sleep(300)'], start_new_session=True); print('CHILD', p.pid, flush=True)")
    log = tmp_path / "step.log"
    step = run_step([sys.executable, "-c", script], env=dict(os.environ), cwd=tmp_path, log_path=log,
                    deadline_s=60, max_log_bytes=1 << 20, pgid_file=tmp_path / "pgid",
                    cancel_reason=lambda: None, use_cgroup=False)
    child = int(log.read_text().split("CHILD ")[1].split()[0])
    print("containment:", step.containment, "leftovers:", step.leftovers)
    assert step.error is None and step.containment == "subreaper"
    assert [p["pid"] for p in step.leftovers] == [child]
    assert "time.sleep(300)" in step.leftovers[0]["command"]
    assert not Path(f"/proc/{child}").exists(), "the setsid grandchild is still there"
    assert "1 process(es) outlived the run and were killed" in log.read_text()


def test_a_dispatch_in_progress_is_not_requeued(ledger):
    """A claim seconds old without a plan is a dispatcher at work (the server's own poller
    runs beside it): the poll pass leaves it claimed, and the dispatch then submits it."""
    from orchestrator.runtime.gates import _Executors
    from orchestrator.usecases.dispatch import claim_gate, dispatch_gate

    engine, settings = ledger
    gate_id = submit(engine, harness_gate(control_ms=20.0, candidate_ms=20.0))
    with Session(engine) as session:
        assert claim_gate(session=session, gate_id=gate_id)
        session.commit()
    poll_pass(engine, settings, gate_ids=[gate_id])
    with Session(engine) as session:
        assert session.get(Gate, gate_id).status == "submitted"
        gate = dispatch_gate(session=session, gate_id=gate_id, executors=_Executors(settings).get,
                             data_dir=settings.data_dir)
        session.commit()
        assert gate.status == "submitted" and gate.job_ref is not None
    assert _wait(engine, settings, gate_id).status == "succeeded"
