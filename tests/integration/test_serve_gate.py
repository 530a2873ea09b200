"""`axbgate serve` runs gates: POST /gates over real HTTP, the server's dispatcher and
poller (lifespan services) drive the local executor, GET /gates/{id} shows the verdict."""

from __future__ import annotations

import time

import httpx
from sqlalchemy.orm import Session

from orchestrator.app.api import create_app
from orchestrator.db.migrate import upgrade
from orchestrator.settings import Settings
from orchestrator.usecases.tokens import create_token
from tests.factories import harness_gate
from tests.live_server import serve


def test_server_runs_a_submitted_gate(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": True, "loop_seconds": 0.5})
    upgrade(settings.database_url)
    app = create_app(settings)
    with Session(app.state.engine) as session:
        _row, secret = create_token(session=session, name="ci")
        session.commit()
    body = harness_gate(control_ms=80.0, candidate_ms=88.0).model_dump(mode="json")
    with serve(app) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            created = client.post("/gates", json=body, headers={"Authorization": f"Bearer {secret}"})
            assert created.status_code == 201, created.text
            gate_id = created.json()["id"]
            deadline = time.monotonic() + 120
            while True:
                gate = client.get(f"/gates/{gate_id}").json()
                if gate["status"] in ("succeeded", "failed", "cancelled"):
                    break
                assert time.monotonic() < deadline, gate["status"]
                time.sleep(0.5)
    assert gate["status"] == "succeeded", gate.get("status_reason")
    assert [r["status"] for r in gate["runs"]] == ["succeeded"] * 3
    primary = [v for v in gate["verdicts"] if v["is_primary"]][0]
    assert primary["verdict"] == "reject"
    assert abs(primary["numbers"]["delta_pct"] - 10.0) < 0.2


def test_cli_remote_mode_submits_and_watches_through_the_api(tmp_path, monkeypatch, capsys):
    import json
    import sys

    from orchestrator.app.cli import main
    from orchestrator.settings import get_settings
    from tests.factories import HARNESS

    settings = Settings(data_dir=tmp_path / "server", gates={"enabled": True, "loop_seconds": 0.5})
    upgrade(settings.database_url)
    app = create_app(settings)
    with Session(app.state.engine) as session:
        _row, secret = create_token(session=session, name="cli")
        session.commit()
    with serve(app) as url:
        monkeypatch.setenv("AXBGATE_SERVER_URL", url)
        monkeypatch.setenv("AXBGATE_API_TOKEN", secret)
        get_settings.cache_clear()
        code = main(["gate", "--policy", "drift", "--command", json.dumps([sys.executable, str(HARNESS), "{warmup_steps}",
                                                      "{measured_steps}"]),
                     "--control-env", "HARNESS_STEP_MS=50", "--candidate-env", "HARNESS_STEP_MS=50",
                     "--warmup-steps", "2", "--measured-steps", "5", "--no-health", "--json"])
        out = capsys.readouterr().out
        assert code == 0, out
        gate = json.loads(out)
        assert gate["status"] == "succeeded"
        assert [v["verdict"] for v in gate["verdicts"] if v["is_primary"]] == ["neutral"]
        # The gate lives in the server's ledger, not in a local embedded one.
        code = main(["submit", "--command", json.dumps(["true"]), "--no-health", "--json"])
        submitted = json.loads(capsys.readouterr().out)
        assert code == 0 and submitted["status"] == "queued" and submitted["id"] == gate["id"] + 1
    monkeypatch.delenv("AXBGATE_API_TOKEN")
    get_settings.cache_clear()
