"""Live progress on a real SQLite ledger: step counts under a steady warmup and a time window,
the sequential run budget and an ETA that covers it (issue 25: "59 / 18", "ETA 7 s" for a gate
that went on to 14 runs)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy.orm import Session


@pytest.fixture
def session(tmp_path):
    from orchestrator.db.migrate import upgrade
    from orchestrator.db.session import build_engine

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    engine = build_engine(url)
    with Session(engine) as s:
        yield s
    engine.dispose()


def _sequential_window_gate(session) -> int:
    from orchestrator.domain.gate_spec import GateCreate
    from orchestrator.usecases.gates import submit_gate

    gate_in = GateCreate(title="window", policy="sequential", warmup_mode="steady",
                         warmup_steps=3, max_warmup_steps=50, measured_steps=15,
                         measured_seconds=3.0, workload={"command": ["true"]},
                         candidate={"env": {"IMPL": "new"}}, health={"enabled": False})
    gate, _ = submit_gate(session=session, gate_in=gate_in)
    session.flush()
    return gate.id


def test_steps_follow_the_window_and_the_eta_covers_the_run_budget(session):
    from orchestrator import store
    from orchestrator.domain.lifecycle import transition
    from orchestrator.usecases.live import gate_live

    gid = _sequential_window_gate(session)
    gate = store.gates.get_gate(session=session, gate_id=gid)
    assert gate.run_pattern == "A A X B"
    transition(gate, "submitted")
    transition(gate, "running")
    first, second, *_ = sorted(gate.runs, key=lambda r: r.order)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    transition(first, "running")
    transition(first, "succeeded")
    # 7 warmup steps until steady, then the 3 s window at 20 ms: 150 measured steps
    store.runs.update_run(session=session, run=first, slowest_rank_step_s=[0.02] * 157,
                          num_warmup_steps=7, num_measured_steps=150, median_step_s=0.02,
                          started_at=t0, ended_at=t0 + dt.timedelta(seconds=0.02 * 157 + 2.0))
    transition(second, "running")
    store.runs.add_steps(session=session, run=second, steps=[
        {"step": i, "slowest_rank_step_s": 0.02, "phase": "warmup" if i < 5 else "measured"}
        for i in range(25)])
    session.commit()

    live = gate_live(session=session, gate_id=gid)
    assert live.measurement == ("warmup to steady state (3 to 50 steps), then a 3 s window "
                                "(at least 15 measured steps)")
    runs = live.runs
    assert [r.num_steps for r in runs] == [157, 25, 0, 0]
    # ended: its own counts; running: its 5 warmup steps + 150; pending: 3..50 warmup + 150
    assert [(r.num_steps_expected, r.num_steps_expected_max) for r in runs] == [
        (157, 157), (155, 155), (153, 200), (153, 200)]
    assert runs[1].num_warmup_steps == 5
    assert runs[1].position == live.position == "run 2 of 4 planned, at most 14"
    assert (live.num_runs_planned, live.max_runs) == (4, 14)
    assert live.num_steps_planned == 157 + 155 + 153 + 153
    # 130 steps left of run 1, 153 of runs 2 and 3 (each with the 2 s launch run 0 showed)
    assert live.eta_s == pytest.approx((130 + 2 * 153) * 0.02 + 2 * 2.0)
    # at most: 10 more runs of 153 steps and a launch each
    assert live.eta_max_s == pytest.approx(live.eta_s + 10 * (153 * 0.02 + 2.0))


def test_the_cost_models_window_from_status_json_sets_the_later_runs(session, tmp_path):
    import json

    from orchestrator.domain.gate_spec import GateCreate
    from orchestrator.executors.plan import GatePaths
    from orchestrator.usecases.gates import submit_gate
    from orchestrator.usecases.live import gate_live

    gate_in = GateCreate(title="auto", policy="sequential", warmup_mode="steady", warmup_steps=2,
                         max_warmup_steps=50, auto_window=True,
                         workload={"recipe": "tiny"}, health={"enabled": False})
    gate, _ = submit_gate(session=session, gate_in=gate_in)
    session.commit()
    paths = GatePaths.of(tmp_path / "data", gate.id)
    paths.status.parent.mkdir(parents=True, exist_ok=True)
    paths.status.write_text(json.dumps({"state": "running", "window": {
        "source": "cost-model", "calibration_run": 0, "measured_steps": 37, "warmup_steps": 4,
        "calibration_warmup_steps": 9, "warmup_source": "conditioning run"}}))
    live = gate_live(session=session, gate_id=gate.id, data_dir=tmp_path / "data")
    later = [r for r in live.runs if r.order >= 1]
    assert {(r.num_steps_expected, r.num_steps_expected_max) for r in later} == {(41, 41)}
    assert "the cost model chose 4 warmup + 37 measured steps per run" in live.measurement
    without = gate_live(session=session, gate_id=gate.id)  # no data_dir: window not known yet
    assert "chosen by the cost model after the conditioning run" in without.measurement
