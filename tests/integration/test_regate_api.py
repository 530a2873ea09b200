"""`/repos` API and pages on SQLite and PostgreSQL with a real git repository, plus the
scheduler on PostgreSQL (APScheduler job store, lease) and the `axbgate repo`/`regate` CLI."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from orchestrator.app.cli import main as cli_main
from orchestrator.db.migrate import upgrade
from orchestrator.db.models import Gate
from orchestrator.db.session import build_engine
from orchestrator.runtime.nightly import NightlyScheduler
from orchestrator.settings import Settings, get_settings
from orchestrator.store.webhooks import try_acquire_lease
from tests.factories import make_harness_repo
from tests.regate_support import HARNESS_COMMAND, add_tracked_repo, commit_step_ms, drive_until


def _body(repo, **extra):
    return {"url": str(repo), "branch": "main", "workload": {"command": HARNESS_COMMAND},
            "options": {"warmup_steps": 2, "measured_steps": 5, "health": {"enabled": False}},
            **extra}


def test_repos_crud_check_and_pages(client, auth, tmp_path):
    repo, shas = make_harness_repo(tmp_path, [50.0])
    # A public address (an IP literal: no DNS here); private ones are refused (test_security).
    created = client.post("/repos", json=_body(repo, notify=["http://93.184.216.34:9/hook"]), headers=auth)
    assert created.status_code == 201, created.text
    repo_id = created.json()["id"]
    assert created.json()["webhook_secret"].startswith("whsec_")
    assert "webhook_secret" not in client.get(f"/repos/{repo_id}").json()["repo"]
    assert created.json()["last_measured_sha"] is None and created.json()["executor"] == "local"
    assert client.post("/repos", json=_body(repo), headers=auth).status_code == 409
    missing = client.post("/repos", json=_body(repo, branch="nope"), headers=auth)
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "branch"]
    gone = client.post("/repos", json=_body(tmp_path / "absent"), headers=auth)
    assert gone.status_code == 422 and gone.json()["detail"][0]["loc"] == ["body", "url"]
    bad_cron = client.post("/repos", json=_body(repo, schedule="0 25 * * *"), headers=auth)
    assert bad_cron.status_code == 422 and bad_cron.json()["detail"][0]["loc"] == ["body", "schedule"]
    assert client.get("/repos").json()["count"] == 1

    patched = client.patch(f"/repos/{repo_id}", json={"schedule": "30 3 * * 1-5", "tolerance_pct": 1.0},
                           headers=auth)
    assert patched.status_code == 200 and patched.json()["schedule"] == "30 3 * * 1-5"
    foreign = client.patch(f"/repos/{repo_id}", json={"last_measured_sha": "f" * 40}, headers=auth)
    assert foreign.status_code == 422, foreign.text

    first = client.post(f"/repos/{repo_id}/check", headers=auth).json()
    assert first["action"] == "baseline" and first["head_sha"] == shas[0]
    assert client.post(f"/repos/{repo_id}/check", headers=auth).json()["action"] == "unchanged"
    head = commit_step_ms(repo, 50.0, "neutral")
    submitted = client.post(f"/repos/{repo_id}/check", headers=auth).json()
    assert submitted["action"] == "submitted" and submitted["head_sha"] == head
    again = client.post(f"/repos/{repo_id}/check", headers=auth).json()
    assert again["action"] == "busy" and again["gate_id"] == submitted["gate_id"]
    gate = client.get(f"/gates/{submitted['gate_id']}").json()
    assert gate["kind"] == "regate" and gate["status"] == "queued"
    view = client.get(f"/repos/{repo_id}").json()
    assert view["gate_ids_in_flight"] == [submitted["gate_id"]]
    assert [e["kind"] for e in view["events"]] == ["baseline"]
    drift = client.get(f"/repos/{repo_id}/drift").json()
    assert drift["points"] == [] and "PELT" in drift["method"]

    accepted = client.patch(f"/repos/{repo_id}", json={"last_measured_sha": head}, headers=auth)
    assert accepted.status_code == 200 and accepted.json()["last_measured_sha"] == head
    assert client.get(f"/repos/{repo_id}").json()["events"][0]["message"] == "measured head set by hand"

    page = client.get(f"/ledger/repos/{repo_id}")
    assert page.status_code == 200 and "drift-plot" in page.text and head[:12] in page.text
    assert client.get("/ledger/repos").status_code == 200
    assert client.get("/ledger/repos/999999").status_code == 404

    assert client.delete(f"/repos/{repo_id}", headers=auth).status_code == 204
    assert client.get(f"/repos/{repo_id}").status_code == 404
    assert client.get(f"/gates/{submitted['gate_id']}").status_code == 200  # gates stay


@pytest.mark.postgres
def test_scheduler_on_postgres(postgres_url, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", database={"url": postgres_url}, gates={"enabled": False},
                        nightly={"interval_seconds": 1.0, "loop_seconds": 0.3, "lease_seconds": 5.0})
    upgrade(postgres_url)
    engine = build_engine(postgres_url)
    repo, shas = make_harness_repo(tmp_path, [50.0])
    repo_id = add_tracked_repo(engine, repo)
    one, two = NightlyScheduler(engine, settings), NightlyScheduler(engine, settings)
    one.start()
    two.start()
    try:
        def measured():
            with engine.connect() as conn:
                return conn.execute(text("SELECT last_measured_sha FROM tracked_repositories")).scalar()

        drive_until(engine, settings, lambda: measured() == shas[0], timeout_s=30)
        head = commit_step_ms(repo, 50.0, "first commit after tracking")
        drive_until(engine, settings, lambda: measured() == head, timeout_s=90)
        assert [one.is_leader, two.is_leader].count(True) == 1
    finally:
        one.stop()
        two.stop()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id FROM apscheduler_jobs")).scalars().all() == [f"repo-{repo_id}"]
        kinds = conn.execute(text("SELECT kind FROM repo_events ORDER BY id")).scalars().all()
    assert kinds == ["baseline", "pass"]
    engine.dispose()


def test_cli_repo_verbs_and_regate_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "cli-data"))
    get_settings.cache_clear()
    repo, shas = make_harness_repo(tmp_path, [50.0])
    args = ["repo", "add", str(repo), "--command", json.dumps(HARNESS_COMMAND), "--warmup-steps", "2",
            "--measured-steps", "5", "--no-health", "--schedule", "15 1 * * *", "--json"]
    assert cli_main(args) == 0
    repo_id = json.loads(capsys.readouterr().out)["id"]
    assert cli_main(["repo", "add", str(repo), "--command", "[1", "--json"]) == 2
    assert "--command must be a JSON list" in capsys.readouterr().err
    assert cli_main(["repo", "add", str(repo), "--command", "[\"true\"]", "--schedule", "bad"]) == 2
    assert "schedule" in capsys.readouterr().err
    assert cli_main(["regate", "--once", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["action"] == "baseline"
    slow = commit_step_ms(repo, 55.0, "slower")
    assert cli_main(["regate", "--once", "--repo", str(repo_id), "--wait", "--timeout-s", "120", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)[0]
    assert result["action"] == "submitted" and result["head_sha"] == slow
    assert cli_main(["repo", "show", str(repo_id), "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [e["kind"] for e in view["events"]] == ["regression", "baseline"]
    assert view["repo"]["last_measured_sha"] == shas[0]
    with Session(build_engine(get_settings().database_url)) as session:  # a server holds the lease
        assert try_acquire_lease(session=session, name="nightly", holder="server",
                                 now=dt.datetime.now(dt.UTC), duration_s=60)
        session.commit()
    assert cli_main(["regate", "--once"]) == 2
    assert "holds the re-gate lease" in capsys.readouterr().err
    assert cli_main(["repo", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 1
    assert cli_main(["repo", "remove", str(repo_id)]) == 0
    assert cli_main(["repo", "remove", str(repo_id)]) == 2
    with Session(build_engine(get_settings().database_url)) as session:
        assert session.get(Gate, result["gate_id"]).status == "succeeded"
