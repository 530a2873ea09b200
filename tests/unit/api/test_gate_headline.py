"""The gate page's headline numbers, the delta plot's band and the history grouped by control
identity, from real verdicts of the engine and a real SQLite ledger (issue 25, point 2)."""

from __future__ import annotations

import datetime as dt

import pytest

from orchestrator import verdict as engine
from orchestrator.app.web.delta_plot import delta_svg
from orchestrator.app.web.headline import copy_deltas, decision_band, effect_text


def _numbers(policy: str, roles: str, medians: tuple[float, ...]) -> dict:
    measurement = engine.measurement_from_pattern(roles, medians, kind="candidate")
    return engine.judge(measurement, engine.get_policy(policy)).to_dict()


def test_copy_deltas_are_each_copy_against_its_neighbours():
    numbers = _numbers("drift", "AXBXA", (0.400, 0.390, 0.404, 0.392, 0.402))
    copies = copy_deltas(numbers)
    assert [(c.candidate_order, c.left_order, c.right_order) for c in copies] == [(1, 0, 2), (3, 2, 4)]
    assert copies[0].delta_pct == pytest.approx((0.390 / 0.402 - 1) * 100)
    assert (copies[0].low_pct, copies[0].high_pct) == pytest.approx(
        ((0.390 / 0.400 - 1) * 100, (0.390 / 0.404 - 1) * 100)[::-1])
    assert copies[1].low_pct < copies[1].delta_pct < copies[1].high_pct


def test_decision_band_is_never_zero_wide():
    drift = _numbers("drift", "AXB", (0.4284051351, 0.4148231971, 0.4264598510))
    band = decision_band("drift", drift)
    assert band.high_pct == pytest.approx(drift["threshold_pct"]) and band.low_pct == -band.high_pct
    assert band.accept_below_pct == -band.high_pct
    seq = {"params": {"min_effect_pct": 0.0, "neutral_band_pct": 1.0}, "threshold_pct": 0.0}
    band = decision_band("sequential", seq)
    assert (band.low_pct, band.high_pct) == (-1.0, 1.0)
    assert (band.accept_below_pct, band.reject_above_pct) == (0.0, 0.0)
    assert "neutral_band_pct" in band.label
    ratio = {"params": {"min_effect_pct": 0.0, "tolerance_pct": 0.5}, "mde_pct": None}
    assert decision_band("ratio-ci", ratio).high_pct == 0.5  # falls back to the tolerance


def test_effect_text_and_delta_svg():
    assert effect_text(2.9, 2.4, 3.4) == "X is 2.900 % slower [+2.400, +3.400] % vs control midpoint"
    assert effect_text(-1.019, -1.269, -0.777).startswith("X is 1.019 % faster [-1.269, -0.777]")
    assert effect_text(None, None, None) == "no effect measured yet"
    numbers = _numbers("drift", "AXBXA", (0.400, 0.390, 0.404, 0.392, 0.402))
    svg = delta_svg(copy_deltas(numbers), decision_band("drift", numbers), estimate_pct=-2.0,
                    estimate_low_pct=None, estimate_high_pct=None, estimate_label="gate (drift)",
                    title="t")
    assert svg.count('<g class="copy"') == 2 and svg.count('<g class="estimate"') == 1
    assert 'class="decision-band"' in svg and 'width="0.00"' not in svg


@pytest.fixture
def session(tmp_path):
    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(url)
    app = create_app(Settings(data_dir=tmp_path / "data", database={"url": url},
                              gates={"enabled": False}, nightly={"enabled": False}))
    s = app.state.session_factory()
    s.info["app"] = app
    yield s
    s.close()


def test_history_groups_by_control_identity_and_finds_change_points_per_group(session):
    from orchestrator import store
    from orchestrator.usecases.history import gate_history
    from tests.ledger_factories import finish_gate, make_gate

    start = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
    ids: dict[str, list[int]] = {"a": [], "b": []}
    for day in range(16):
        # Workload a: steady 0.43 s for 8 days, then its controls got 4.7% slower.
        # Workload b (another command): steady 0.60 s, interleaved in time with a.
        which = "a" if day % 2 == 0 else "b"
        base = (0.43 if day < 8 else 0.45) if which == "a" else 0.60
        gid = make_gate(session, title=f"{which}{day}", family=None)
        gate = store.gates.get_gate(session=session, gate_id=gid)
        gate.workload = {**gate.workload, "command": ["python", f"train_{which}.py"]}
        finish_gate(session, gid, medians_s=(base, base * 0.99, base * 1.001))
        gate.created_at = start + dt.timedelta(days=day)
        ids[which].append(gid)
    session.commit()
    hist = gate_history(session=session, tolerance_pct=0.5)
    assert [g.gate_ids for g in hist.groups] == [ids["a"], ids["b"]]
    assert "train_a.py" in hist.groups[0].label and "train_b.py" in hist.groups[1].label
    # The shift of a is found at its 5th gate (day 8); b, steady, has none.
    assert hist.groups[0].change_point_gate_ids == [ids["a"][4]]
    assert hist.groups[1].change_point_gate_ids == []
    assert [hist.points[i].gate_id for i in hist.change_points] == [ids["a"][4]]
    assert {p.group for p in hist.points if p.gate_id in ids["b"]} == {1}


def test_gate_page_states_the_real_measurement_rule(session):
    from fastapi.testclient import TestClient

    from orchestrator import store
    from tests.ledger_factories import finish_gate, make_gate

    gid = make_gate(session, title="steady warmup, time window")
    gate = store.gates.get_gate(session=session, gate_id=gid)
    gate.options = {**gate.options, "warmup_mode": "steady", "max_warmup_steps": 50,
                    "measured_seconds": 3.0}
    finish_gate(session, gid)
    session.commit()
    with TestClient(session.info["app"]) as client:
        page = client.get(f"/ledger/gates/{gid}").text
    rule = page.split('id="measurement-rule">')[1].split("</span>")[0]
    assert rule == "warmup to steady state (3 to 50 steps), then a 3 s window (at least 6 measured steps)"
    assert 'id="card-runs" data-done="3" data-planned="3" data-max="3"' in page
