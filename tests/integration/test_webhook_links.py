"""Notifications link to absolute ledger URLs: ``nightly.public_url`` when set, else the
base URL of the request that caused them (``POST /repos/{id}/check``) or the address
``axbgate serve`` listens on; a delivery's ``last_error`` is empty after a success."""

from __future__ import annotations

import shutil

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from orchestrator.app.api import create_app
from orchestrator.app.cli.admin import listen_url
from orchestrator.db.migrate import upgrade
from orchestrator.runtime.nightly import deliver_webhooks
from orchestrator.settings import Settings
from orchestrator.usecases.tokens import SCOPES, create_token
from tests.factories import make_harness_repo
from tests.regate_support import add_tracked_repo

HOOK = "http://93.184.216.34:9/hook"  # a public address literal (no DNS in tests)


def _failed_check_delivery(settings: Settings, tmp_path, base_url: str) -> tuple[int, dict]:
    """Track a repository, make it unreadable, check it through the API; return the
    repository id and its queued delivery."""
    upgrade(settings.database_url)
    app = create_app(settings)
    with Session(app.state.engine) as session:
        _row, secret = create_token(session=session, name="ci", scopes=SCOPES)
        session.commit()
    repo, _ = make_harness_repo(tmp_path, [50.0])
    repo_id = add_tracked_repo(app.state.engine, repo, notify=[HOOK])
    shutil.rmtree(repo)
    with TestClient(app, base_url=base_url) as client:
        checked = client.post(f"/repos/{repo_id}/check", headers={"Authorization": f"Bearer {secret}"})
        assert checked.json()["action"] == "check_failed"
        deliveries = client.get(f"/repos/{repo_id}").json()["deliveries"]
    assert len(deliveries) == 1
    return repo_id, deliveries[0]


def test_link_uses_the_request_base_url_when_public_url_is_unset(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": False}, nightly={"enabled": False})
    repo_id, delivery = _failed_check_delivery(settings, tmp_path, "http://ledger.internal:8123")
    assert delivery["payload"]["event"] == "check_failed"
    assert delivery["payload"]["link"] == f"http://ledger.internal:8123/ledger/repos/{repo_id}"


def test_public_url_wins_over_the_request(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": False},
                        nightly={"enabled": False, "public_url": "https://axb.example.org/"})
    repo_id, delivery = _failed_check_delivery(settings, tmp_path, "http://ledger.internal:8123")
    assert delivery["payload"]["link"] == f"https://axb.example.org/ledger/repos/{repo_id}"


def test_serve_links_to_the_address_it_listens_on():
    import socket

    assert listen_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert listen_url("0.0.0.0", 9000) == f"http://{socket.getfqdn()}:9000"
    assert listen_url("::1", 80) == "http://[::1]:80"
    base = Settings().with_public_url(listen_url("127.0.0.1", 8000))
    assert base.nightly.public_url == "http://127.0.0.1:8000"
    assert Settings(nightly={"public_url": "https://x.org"}).with_public_url("http://y").nightly.public_url \
        == "https://x.org"


@pytest.mark.parametrize("answer, status, last_error", [
    (204, "delivered", None),
    (503, "failed", "HTTP 503: busy"),
])
def test_last_error_is_empty_after_a_success(tmp_path, answer, status, last_error):
    settings = Settings(data_dir=tmp_path / "data", gates={"enabled": False},
                        nightly={"enabled": False, "webhook_max_attempts": 1})
    repo_id, _ = _failed_check_delivery(settings, tmp_path, "http://testserver")
    engine = create_app(settings).state.engine
    transport = httpx.MockTransport(lambda request: httpx.Response(answer, text="busy"))
    assert deliver_webhooks(engine, settings, transport=transport) == 1
    with TestClient(create_app(settings)) as client:
        delivery = client.get(f"/repos/{repo_id}").json()["deliveries"][0]
    assert delivery["status"] == status and delivery["last_status_code"] == answer
    assert delivery["last_error"] == last_error


def test_repo_show_prints_the_last_error_only_for_failures(tmp_path, capsys, monkeypatch):
    from orchestrator.app.cli import main
    from orchestrator.settings import get_settings

    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AXBGATE_NIGHTLY__ENABLED", "false")  # this test delivers, not a scheduler
    monkeypatch.setenv("AXBGATE_GATES__ENABLED", "false")
    get_settings.cache_clear()
    settings = get_settings()
    repo_id, _ = _failed_check_delivery(settings, tmp_path, "http://testserver")
    engine = create_app(settings).state.engine
    assert deliver_webhooks(engine, settings, transport=httpx.MockTransport(
        lambda request: httpx.Response(200))) == 1
    capsys.readouterr()
    assert main(["repo", "show", str(repo_id)]) == 0
    out = capsys.readouterr().out
    assert "health failing" in out
    assert f"(check_failed) to {HOOK}: delivered, 1 attempts; last answer HTTP 200" in out
    assert "last error" not in out
