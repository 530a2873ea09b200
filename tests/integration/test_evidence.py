"""Evidence a run cannot touch (issue 24, points 1-3): a real local gate whose candidate
forges the controls' results and leaves a ``setsid`` child behind; runs sealed off from
each other; every process of a run gone when it ends. Real driver, real processes, real
ledger on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from orchestrator.db.models import Gate, Run, Verdict
from orchestrator.executors.plan import GatePaths
from orchestrator.runtime.gates import dispatch_pass, poll_pass
from orchestrator.settings import get_settings
from tests.factories import FIXTURES, harness_gate, submit, wait_for_gate

FORGER = FIXTURES / "forger.py"


@pytest.fixture
def ledger(db_url, monkeypatch):
    """The test's ledger on ``db_url`` (SQLite file or PostgreSQL)."""
    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    get_settings.cache_clear()
    engine = create_engine(db_url)
    yield engine, get_settings()
    engine.dispose()


def _forged_gate(**extra):
    return harness_gate(
        control_ms=100.0, candidate_ms=120.0,
        workload={"command": [sys.executable, str(FORGER), "{out_dir}", "{role}", "{warmup_steps}",
                              "{measured_steps}", *extra.pop("mode", [])]}, **extra)


def _run_to_end(engine, settings, gate_id: int, timeout_s: float = 120.0):
    return wait_for_gate(engine, settings, gate_id, timeout_s=timeout_s, dispatch=True)


def _logged_median(log: Path) -> float:
    """The median the run printed itself (its AXBGATE_RESULT line in the hashed log)."""
    for line in log.read_text().splitlines():
        if line.startswith("AXBGATE_RESULT "):
            return json.loads(line.split(" ", 1)[1])["median_step_s"]
    raise AssertionError(f"no AXBGATE_RESULT in {log}")


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":  # dead; only its parent's wait is left
            return True
        time.sleep(0.1)
    return False


def _check_forged_gate(engine, settings, gate_id: int) -> dict:
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "succeeded", gate.status_reason
    paths = GatePaths.of(settings.data_dir, gate_id)
    with Session(engine) as session:
        runs = list(session.scalars(select(Run).where(Run.gate_id == gate_id).order_by(Run.order)))
        stored = {r.role: r.median_step_s for r in runs}
        verdict = session.scalars(select(Verdict).where(Verdict.gate_id == gate_id,
                                                       Verdict.is_primary.is_(True))).one()
        leftovers = runs[1].result_extra.get("leftovers")
        print("stored medians:", stored, "verdict:", verdict.verdict, verdict.numbers.get("delta_pct"))
        print("leftovers of X:", leftovers)
        assert [r.role for r in runs] == ["A", "X", "B"]
        # The ledger holds what each run's hashed log says, never what the candidate wrote.
        for r in runs:
            assert r.median_step_s == pytest.approx(_logged_median(paths.run_log(r.order, r.role)), rel=1e-9)
        assert stored["A"] == pytest.approx(0.1, rel=5e-4) and stored["B"] == pytest.approx(0.1, rel=5e-4)
        assert stored["X"] == pytest.approx(0.12, rel=5e-4)
        assert verdict.verdict == "reject", verdict.numbers
        assert verdict.numbers["delta_pct"] == pytest.approx(20.0, abs=0.2)
    # The setsid child was killed when X ended (before it wrote anything) and is recorded.
    pid = int((paths.run_out(1, "X") / "forger.pid").read_text())
    assert _gone(pid), f"the candidate's setsid child {pid} outlived its run"
    assert leftovers and leftovers["count"] >= 1, leftovers
    assert pid in [p["pid"] for p in leftovers["processes"]], leftovers
    assert "forger" in next(p["command"] for p in leftovers["processes"] if p["pid"] == pid)
    assert not list(paths.out_root.rglob("02-B.json")), "the child wrote after its run ended"
    assert json.loads(paths.run_result(2, "B").read_text())["outcome"]["fields"]["median_step_s"] == \
        pytest.approx(0.1, rel=5e-4)
    forged = dict(re.findall(r"^FORGE (\S+): (.+)$", paths.run_log(1, "X").read_text(), re.M))
    assert forged, "the forger printed what it tried"
    return {"forged": forged, "paths": paths, "leftovers": leftovers}


def test_forged_control_results_do_not_reach_the_ledger(ledger):
    """As the service's own account: the forged files land beside the candidate's own
    folder, the driver's results stay as they were, the verdict is the honest reject."""
    engine, settings = ledger
    gate_id = submit(engine, _forged_gate())
    out = _check_forged_gate(engine, settings, gate_id)
    paths = out["paths"]
    # {out_dir}/.. is out/, not the driver's runs/ folder: what it wrote there is no evidence.
    assert out["forged"][str(paths.out_root / "00-A.json")] == "ok"
    # The driver's own files belong to the service: runs/ 0700, logs and results 0600.
    assert paths.runs_dir.stat().st_mode & 0o777 == 0o700
    for name in ("00-A.log", "00-A.json", "01-X.log", "02-B.json"):
        assert (paths.runs_dir / name).stat().st_mode & 0o077 == 0, name
    assert out["leftovers"]["containment"] in ("cgroup v2", "subreaper")
    # Shown on the run: its JSON and its page.
    from fastapi.testclient import TestClient

    from orchestrator.app.api import create_app

    with Session(engine) as session:
        x_id = session.scalars(select(Run.id).where(Run.gate_id == gate_id, Run.order == 1)).one()
    pid = out["leftovers"]["processes"][0]["pid"]
    with TestClient(create_app(settings)) as client:
        shown = client.get(f"/runs/{x_id}").json()["result_extra"]["leftovers"]
        assert shown["count"] == out["leftovers"]["count"] and shown["processes"][0]["pid"] == pid
        page = client.get(f"/ledger/runs/{x_id}").text
        assert 'id="run-leftovers"' in page and f"<code>{pid} " in page


def test_forged_driver_results_fail_the_gate(ledger):
    """As the service's own account a run can reach the driver's runs/ folder: the driver
    finds its result file changed when the forging run ends and fails the gate (no
    verdict), naming the file."""
    engine, settings = ledger
    gate_id = submit(engine, _forged_gate(mode=["driver"]))
    gate = _run_to_end(engine, settings, gate_id)
    print("gate:", gate.status, gate.status_reason)
    assert gate.status == "failed"
    assert gate.status_reason == ("runs/00-A.json changed after the driver wrote it (found while run 1 "
                                  "(X) ended): a run wrote into the driver's files")
    with Session(engine) as session:
        assert list(session.scalars(select(Verdict).where(Verdict.gate_id == gate_id))) == []
    pid = int((GatePaths.of(settings.data_dir, gate_id).run_out(1, "X") / "forger.pid").read_text())
    assert _gone(pid)


def test_own_result_file_disagreeing_with_the_log_fails_the_run(ledger):
    """A run's own result file is input to check: one claiming a faster median than the
    run's log fails the run, naming the file, its value and the log's."""
    engine, settings = ledger
    gate_id = submit(engine, _forged_gate(mode=["own"]))
    gate = _run_to_end(engine, settings, gate_id)
    assert gate.status == "failed"
    with Session(engine) as session:
        x = session.scalars(select(Run).where(Run.gate_id == gate_id, Run.order == 1)).one()
        print("X error:", x.error)
        assert x.status == "failed"
        assert re.search(r"its own result file out/01-X/01-X\.json says median_step_s=0\.09 but its "
                         r"log runs/01-X\.log says 0\.12\d*", x.error), x.error
        assert list(session.scalars(select(Verdict).where(Verdict.gate_id == gate_id))) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root (CI runs as root)")
def test_forged_results_as_the_run_account(db_url, monkeypatch):
    """Under RUN_AS_USER=nobody the candidate cannot write the driver's results, the
    controls' folders or another gate's files; the verdict is the honest reject."""
    data = Path(tempfile.mkdtemp(prefix="axbgate-evidence-"))
    data.chmod(0o755)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(data))
    monkeypatch.setenv("AXBGATE_DATABASE__URL", db_url)
    monkeypatch.setenv("AXBGATE_SECURITY__RUN_AS_USER", "nobody")
    fixtures = data / "fixtures"  # the venv under /root is not readable by nobody
    shutil.copytree(FIXTURES, fixtures, ignore=shutil.ignore_patterns("frameworks", "*.log"))
    subprocess.run(["chmod", "-R", "a+rX", str(fixtures)], check=True)
    get_settings.cache_clear()
    engine, settings = create_engine(db_url), get_settings()
    try:
        gate_in = harness_gate(control_ms=100.0, candidate_ms=120.0, workload={"command": [
            python, str(fixtures / "forger.py"), "{out_dir}", "{role}", "{warmup_steps}",
            "{measured_steps}", "driver"]})
        gate_id = submit(engine, gate_in)
        out = _check_forged_gate(engine, settings, gate_id)
        paths = out["paths"]
        forged = out["forged"]
        print("forgery as nobody:", forged)
        assert forged[str(paths.runs_dir / "00-A.json")].startswith("error")
        assert forged[str(paths.run_out(0, "A") / "00-A.json")].startswith("error")
        assert forged[str(paths.out_root / "00-A.json")].startswith("error")
        nobody = pwd.getpwnam("nobody").pw_uid
        for path in (paths.root, paths.runs_dir, paths.plan, paths.status, paths.run_log(0, "A"),
                     paths.out_root, paths.run_out(0, "A"), paths.run_out(1, "X")):
            assert path.stat().st_uid != nobody, f"{path} belongs to the run account"
        assert paths.run_log(1, "X").stat().st_mode & 0o077 == 0
    finally:
        engine.dispose()
        get_settings.cache_clear()
        subprocess.run(["rm", "-rf", str(data)], check=False)


def _slurm_up() -> bool:
    if shutil.which("sbatch") is None:
        return False
    out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, check=False)
    return "UP" in out.stdout


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_step_leaves_no_setsid_grandchild(ledger):
    """Under the real Slurm cluster (ProctrackType=proctrack/linuxproc, which loses a
    setsid grandchild once its parent exits) every task of a run's srun step runs under
    the per-task reaper: the candidate's setsid child is gone after its step and recorded."""
    if not _slurm_up():
        if os.environ.get("CI"):
            pytest.fail("Slurm is not up in CI: scripts/slurm_up.sh should have started it")
        pytest.skip("Slurm is not up (run scripts/slurm_up.sh as root)")
    engine, settings = ledger
    gate_in = _forged_gate(executor="slurm", topology={"nodes": 1, "time_limit_min": 5})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine, expire_on_commit=False) as session:
            gate = session.get(Gate, gate_id)
            if gate.status in ("succeeded", "failed", "cancelled"):
                break
        time.sleep(1.0)
    assert gate.status == "succeeded", gate.status_reason
    paths = GatePaths.of(settings.data_dir, gate_id)
    pid = int((paths.run_out(1, "X") / "forger.pid").read_text())
    assert _gone(pid), f"the setsid grandchild {pid} of the srun step outlived it"
    with Session(engine) as session:
        x = session.scalars(select(Run).where(Run.gate_id == gate_id, Run.order == 1)).one()
        leftovers = x.result_extra.get("leftovers")
        print("slurm leftovers:", leftovers, "command:", x.command)
        assert x.command[0] == "srun" and "reaper.py" in x.command[x.command.index("--") - 1]
    assert leftovers and pid in [p["pid"] for p in leftovers["processes"]], leftovers
    assert leftovers["containment"].endswith("per-task reaper in the srun step")
    assert not list(paths.out_root.rglob("02-B.json"))
