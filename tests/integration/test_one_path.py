"""Issue 11's fixes, each against the real parts: the options migration on SQLite and
PostgreSQL, the allocation's extend decision and the stored verdict sharing one builder and
one control history, and exactly one writer per run while `axbgate gate` and
`axbgate serve` work on the same ledger."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from tests.factories import HARNESS, harness_gate, open_ledger, submit

_OLD_PARAMS = {"max_drift_pct": 1.5, "_health": {"enabled": False, "timeout_s": 60.0},
               "_run_timeout_s": 42.0, "_max_extend": 2, "_max_log_bytes": 2**20}


def _filler(column: sa.Column):
    kind = type(column.type).__name__.lower()
    if "json" in kind:
        return {}
    if "int" in kind:
        return 0
    if "bool" in kind:
        return False
    if "date" in kind or "time" in kind:
        return dt.datetime.now(dt.timezone.utc)
    if "float" in kind or "numeric" in kind:
        return 0.0
    return "x"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_options_leave_policy_params_on_upgrade_and_come_back_on_downgrade(backend, request, tmp_path):
    from orchestrator.db.migrate import downgrade, upgrade

    url = (f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    upgrade(url, "0003")
    engine = sa.create_engine(url)
    gates = sa.Table("gates", sa.MetaData(), autoload_with=engine)
    row = {c.name: _filler(c) for c in gates.columns
           if not c.nullable and c.server_default is None and not c.primary_key}
    row.update(kind="candidate", status="succeeded", run_pattern="A X B", policy="drift",
               policy_params=_OLD_PARAMS)
    with engine.begin() as conn:
        conn.execute(gates.insert().values(**row))
    engine.dispose()
    upgrade(url)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        params, options, history = conn.execute(
            sa.text("SELECT policy_params, options, control_history FROM gates")).one()
    engine.dispose()
    load = (lambda v: json.loads(v) if isinstance(v, str) else v)
    assert load(params) == {"max_drift_pct": 1.5}
    assert load(options) == {"health": {"enabled": False, "timeout_s": 60.0}, "run_timeout_s": 42.0,
                             "max_extend": 2, "max_log_bytes": 2**20}
    assert history is None
    downgrade(url, "0003")
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        params = conn.execute(sa.text("SELECT policy_params FROM gates")).scalar_one()
    engine.dispose()
    assert load(params) == _OLD_PARAMS


def _seed_history(session: Session, num_pairs: int, command: list[str], control: dict) -> None:
    """Earlier succeeded gates of the same control identity (command, control environment,
    steps) with tight control pairs."""
    from orchestrator import store
    from orchestrator.domain.lifecycle import transition
    from orchestrator.usecases.gates import submit_gate

    for i in range(num_pairs):
        gate_in = harness_gate(control_ms=100.0, candidate_ms=100.0, control=control,
                               workload={"command": command}, title=f"history {i}")
        gate, _ = submit_gate(session=session, gate_in=gate_in)
        row = store.gates.get_gate(session=session, gate_id=gate.id)
        for run, median in zip(sorted(row.runs, key=lambda r: r.order),
                               (0.1000, 0.1001 + 1e-5 * (i % 3), 0.1002)):
            transition(run, "running")
            run.median_step_s = median
            transition(run, "succeeded")
        transition(row, "submitted")
        transition(row, "running")
        transition(row, "succeeded")
    session.commit()


@pytest.mark.slow
def test_extend_decision_and_stored_verdict_use_the_same_history():
    """ratio-ci calibrated on 20 earlier control pairs decides a 3% speedup on A X B. With
    the gate's own controls only (1 degree of freedom) it could not, and the allocation
    used to decide whether to extend WITHOUT the history: it appended X B although the
    stored verdict, WITH the history, was already decided."""
    from orchestrator.runtime.gates import dispatch_pass, poll_pass
    from orchestrator.usecases.gates import get_gate

    engine, settings = open_ledger()
    command = [sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}", "{run_index}"]
    control = {"env": {"HARNESS_STEP_MS": "100", "HARNESS_DRIFT_PCT": "0.05"}}
    with Session(engine) as session:
        _seed_history(session, 20, command, control)
    gate_in = harness_gate(control_ms=100.0, candidate_ms=97.0, workload={"command": command},
                           policy="ratio-ci", max_extend=1,
                           control=control,
                           candidate={"env": {"HARNESS_STEP_MS": "97", "HARNESS_DRIFT_PCT": "0.05"}})
    gate_id = submit(engine, gate_in)
    dispatch_pass(engine, settings, gate_ids=[gate_id])
    deadline = time.monotonic() + 180
    while True:
        poll_pass(engine, settings, gate_ids=[gate_id])
        with Session(engine) as session:
            gate = get_gate(session=session, gate_id=gate_id)
        if gate.status in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert gate.status == "succeeded", gate.status_reason
    primary = next(v for v in gate.verdicts if v.is_primary)
    assert primary.policy == "ratio-ci"
    assert primary.verdict == "accept", primary.numbers
    assert primary.numbers["num_history_pairs"] == 20
    # Decided with the history, so the allocation did not extend the pattern.
    assert [r.role for r in gate.runs] == ["A", "X", "B"]
    plan = json.loads((settings.data_dir / "gates" / f"{gate_id:06d}" / "plan.json").read_text())
    assert len(plan["control_history"]) == 20
    assert plan["policy_params"] == {} and "health" not in plan["policy_params"]


def _wait_http(url: str, deadline_s: float) -> None:
    import httpx

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {deadline_s} s")
        time.sleep(0.2)


@pytest.mark.slow
def test_cli_gates_while_the_server_polls_the_same_ledger_have_one_writer(tmp_path):
    from tests.live_server import free_port

    env = {**os.environ, "AXBGATE_DATA_DIR": str(tmp_path / "data"),
           "AXBGATE_GATES__LOOP_SECONDS": "0.2"}
    env.pop("AXBGATE_SERVER_URL", None)
    axbgate = [os.path.join(os.path.dirname(sys.executable), "axbgate")]
    port = free_port()
    server_log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([*axbgate, "serve", "--port", str(port)], env=env, stdout=server_log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_http(f"http://127.0.0.1:{port}/healthz", 60)
        command = json.dumps([sys.executable, str(HARNESS), "{warmup_steps}", "{measured_steps}"])
        for i in range(20):
            proc = subprocess.run(
                [*axbgate, "gate", "--command", command, "--no-health", "--json", "--policy", "drift",
                 "--control-env", "HARNESS_STEP_MS=20", "--candidate-env", "HARNESS_STEP_MS=20",
                 "--control-env", "HARNESS_SLEEP_S=0.03", "--candidate-env", "HARNESS_SLEEP_S=0.03",
                 "--warmup-steps", "3", "--measured-steps", "12", "--title", f"race {i}"],
                env=env, capture_output=True, text=True, timeout=240, check=False)
            assert proc.returncode == 0, f"gate {i}: {proc.stderr[-3000:]}"
            assert json.loads(proc.stdout)["status"] == "succeeded"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        server_log.close()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "Traceback" not in log and "UNIQUE constraint" not in log, log[-3000:]
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'axbgate.db'}")
    with engine.connect() as conn:
        statuses = conn.execute(sa.text("SELECT status FROM gates")).scalars().all()
        per_run = conn.execute(sa.text(
            "SELECT runs.id, COUNT(run_steps.id) FROM runs LEFT JOIN run_steps "
            "ON run_steps.run_id = runs.id GROUP BY runs.id")).all()
        verdicts = conn.execute(sa.text(
            "SELECT gate_id, COUNT(*) FROM verdicts WHERE is_primary GROUP BY gate_id")).all()
    engine.dispose()
    assert statuses == ["succeeded"] * 20
    assert len(per_run) == 60 and {n for _, n in per_run} == {15}
    assert len(verdicts) == 20 and {n for _, n in verdicts} == {1}
