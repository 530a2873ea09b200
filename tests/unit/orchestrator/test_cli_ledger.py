"""CLI ledger verbs in embedded mode (SQLite): token, show, ledger, decide, report."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

from orchestrator.app.cli import main


@pytest.fixture
def ledger_ids():
    from orchestrator.db.migrate import upgrade
    from orchestrator.db.session import build_engine
    from orchestrator.settings import get_settings
    from tests.ledger_factories import seed_ledger

    settings = get_settings()
    upgrade(settings.database_url)
    engine = build_engine(settings.database_url)
    with Session(engine) as session:
        ids = seed_ledger(session, settings.artifacts_dir)
        session.commit()
    engine.dispose()
    return ids


def _json(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_token_create_and_revoke(capsys):
    created = _json(capsys, ["token", "create", "ci", "--json"])
    assert len(created["token"]) >= 40 and created["revoked_at"] is None
    assert main(["token", "create", "ci"]) == 2  # name taken while active
    revoked = _json(capsys, ["token", "revoke", str(created["id"]), "--json"])
    assert revoked[0]["name"] == "ci" and revoked[0]["revoked_at"]
    assert main(["token", "revoke", "ci"]) == 2


def test_show_ledger_decide_report(capsys, ledger_ids, tmp_path):
    view = _json(capsys, ["show", str(ledger_ids["accept"]), "--json"])
    assert view["summary"]["verdict"] == "accept"
    page = _json(capsys, ["ledger", "--tag", "qkv", "--json"])
    assert [g["id"] for g in page["data"]] == [ledger_ids["degraded"], ledger_ids["accept"]]
    assert main(["decide", str(ledger_ids["accept"]), "--decision", "reject"]) == 2
    dec = _json(capsys, ["decide", str(ledger_ids["accept"]), "--decision", "reject",
                         "--reason", "+3 GiB", "--note", "for alice", "--json"])
    # Embedded mode records the OS user; the client only adds a note.
    import getpass

    assert dec["decision"] == "reject" and dec["decided_by"] == getpass.getuser()
    assert dec["note"] == "for alice" and dec["token_id"] is None
    capsys.readouterr()
    assert main(["report", "--gate", str(ledger_ids["accept"])]) == 0
    text = capsys.readouterr().out
    assert "## Gate #" in text and "-12.609 ms" in text and "**Decision:** reject" in text
    out = tmp_path / "REPORT.md"
    assert main(["report", "--tag", "qkv", "-o", str(out)]) == 0
    md = out.read_text()
    assert "### Stopping points" not in md or "| topology |" in md
    assert md.count(f"| #{ledger_ids['degraded']} |") == 1
    assert main(["show", "9999"]) == 2
    assert main(["report", "--gate", "1", "--tag", "x"]) == 2
