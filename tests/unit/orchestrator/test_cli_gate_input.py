"""`axbgate gate` refuses ambiguous or invalid input before anything is stored."""

from __future__ import annotations

import json

import pytest

from orchestrator.app.cli import main


@pytest.mark.parametrize("args, fragment", [
    (["--command", "[]"], "workload.command must be a non-empty argv list"),
    (["--command", '"python x.py"'], "JSON list of strings"),
    (["--command", '["x"]', "--recipe", "tiny"], "exactly one of recipe or command"),
    (["--repo", "/tmp", "--command", '["x"]'], "--repo needs"),
    (["--candidate-ref", "main"], "need --repo"),
    (["--candidate-env", "NOEQUALS"], "NAME=VALUE"),
    (["--candidate-override", "measure.warmup_steps=0"], "gate's (warmup_steps"),
    (["--criteria", "no-such-criteria"], "health.criteria"),
    (["--candidate-override", "model.num_layers=abc"], "num_layers"),
    (["--candidate-override", "model.colour=red"], "colour"),
    (["--pattern", "A X"], "at least two controls"),
])
def test_bad_gate_input_exits_2_and_stores_nothing(capsys, args, fragment):
    code = main(["gate", "--no-wait", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert fragment in err and "Traceback" not in err
    assert main(["ledger", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 0


def test_spec_must_be_an_object(capsys, tmp_path):
    spec = tmp_path / "gate.json"
    spec.write_text("[1, 2]")
    assert main(["gate", "--spec", str(spec), "--title", "x", "--no-wait"]) == 2
    assert "must be a JSON/TOML object" in capsys.readouterr().err


def test_verdict_with_extreme_medians_is_a_clean_error(capsys):
    assert main(["verdict", "--a", "1e300", "--x", "1.7e308", "--b", "1e300", "--json"]) == 2
    assert "too extreme" in capsys.readouterr().err


def test_unwritable_data_dir_is_a_clean_error(capsys, monkeypatch, tmp_path):
    from orchestrator.settings import get_settings

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(blocker / "sub"))
    get_settings.cache_clear()
    assert main(["ledger"]) == 2
    assert "AXBGATE_DATA_DIR" in capsys.readouterr().err


def test_ledger_filter_values_are_checked(capsys):
    from pydantic import ValidationError

    from orchestrator.schemas.views import GateFilters

    with pytest.raises(ValidationError, match="unknown status 'bogus'"):
        GateFilters(status="bogus")
    assert GateFilters(status="failed").status == "failed"


def test_unknown_axbgate_env_is_warned(monkeypatch, caplog):
    from orchestrator.settings import get_settings

    monkeypatch.setenv("AXBGATE_EXECUTOR__BOGUS", "1")
    get_settings.cache_clear()
    with caplog.at_level("WARNING"):
        get_settings()
    assert "AXBGATE_EXECUTOR__BOGUS names no axbgate setting" in caplog.text


def test_relative_criteria_path_is_resolved_on_the_submitting_side(capsys, tmp_path, monkeypatch):
    from tests.factories import FIXTURES

    work = tmp_path / "work"
    (work / "conf").mkdir(parents=True)
    (work / "conf" / "mine.toml").write_text((FIXTURES / "criteria-impossible.toml").read_text())
    monkeypatch.chdir(work)
    assert main(["submit", "--command", '["true"]', "--criteria", "conf/mine.toml", "--json"]) == 0
    gate = json.loads(capsys.readouterr().out)
    # Stored as the absolute path the allocation (started elsewhere) can open.
    assert gate["options"]["health"]["criteria"] == str((work / "conf" / "mine.toml").resolve())


@pytest.mark.parametrize("value", ["conf/missing.toml", "../nowhere/x.toml"])
def test_missing_criteria_file_is_refused_naming_the_field(capsys, tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    assert main(["submit", "--command", '["true"]', "--criteria", value]) == 2
    err = capsys.readouterr().err
    assert f"health.criteria: no criteria file {value!r}" in err
    assert str((tmp_path / value).resolve()) in err
    assert main(["ledger", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 0
