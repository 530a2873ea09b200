"""Help and error texts say what the code does (issue 25): the real default pattern, a clear
``--spec`` error, a 401 message without an empty slot, and ``decide`` naming the same values
in its help and its error."""

from __future__ import annotations

import json

from orchestrator.app.cli import main


def _help(capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main([*argv, "--help"]) == 0
    return " ".join(capsys.readouterr().out.replace("│", " ").split())


def test_pattern_help_states_the_pattern_gates_really_run(capsys):
    text = _help(capsys, "gate")
    assert "Default: 'A A X B' under the sequential policy" in text
    assert "'A X B' under --policy drift or ratio-ci" in text
    capsys.readouterr()
    assert main(["submit", "--recipe", "tiny", "--no-health", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_pattern"] == "A A X B"
    assert main(["submit", "--recipe", "tiny", "--no-health", "--policy", "drift", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_pattern"] == "A X B"


def test_spec_on_a_missing_file_names_the_option_and_the_fix(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    capsys.readouterr()
    assert main(["gate", "--spec", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"axbgate: error: --spec: file {missing} not found; give the path of a "
                           "gate request as JSON or TOML (GateCreate, docs/server.md)")
    assert "Errno" not in err
    assert main(["gate", "--spec", str(tmp_path)]) == 2
    assert f"--spec: {tmp_path} is a folder" in capsys.readouterr().err


def test_decide_help_and_error_list_the_same_decisions(capsys, tmp_path):
    from orchestrator.domain.decisions import DECISIONS
    from tests.ledger_factories import make_gate

    text = _help(capsys, "decide")
    listed = ", ".join(DECISIONS)
    assert f"One of {listed}." in text
    from sqlalchemy.orm import Session

    from orchestrator.db.migrate import upgrade
    from orchestrator.db.session import build_engine
    from orchestrator.settings import get_settings

    upgrade(get_settings().database_url)
    engine = build_engine(get_settings().database_url)
    with Session(engine) as session:
        gid = make_gate(session)
        session.commit()
    engine.dispose()
    capsys.readouterr()
    assert main(["decide", str(gid), "--decision", "maybe"]) == 2
    assert f"must be one of {listed}" in capsys.readouterr().err


def test_remote_401_message_has_no_empty_slot(capsys, tmp_path, monkeypatch):
    from orchestrator.app.api import create_app
    from orchestrator.db.migrate import upgrade
    from orchestrator.settings import Settings, get_settings
    from tests.live_server import serve

    url = f"sqlite:///{tmp_path / 'server.db'}"
    upgrade(url)
    app = create_app(Settings(data_dir=tmp_path / "server", database={"url": url},
                              gates={"enabled": False}, nightly={"enabled": False}))
    with serve(app) as base:
        monkeypatch.setenv("AXBGATE_SERVER_URL", base)
        monkeypatch.setenv("AXBGATE_API_TOKEN", "not-a-token")
        get_settings.cache_clear()
        capsys.readouterr()
        assert main(["decide", "1", "--decision", "reject", "--reason", "slow"]) == 2
        err = capsys.readouterr().err.strip()
    assert err.startswith("axbgate: error: server answered 401: ")
    assert "401: :" not in err and len(err) > len("axbgate: error: server answered 401: ") + 5
