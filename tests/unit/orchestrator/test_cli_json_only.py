"""Every verb with ``--json`` prints JSON and nothing else on stdout (issue 25: ``health
--json`` printed 8 ``AXBGATE_*`` record lines after its object)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from orchestrator.app.cli import main


def _verbs_with_json() -> set[str]:
    from typer.main import get_command

    from orchestrator.app.cli import app

    found: set[str] = set()

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
        elif any("--json" in getattr(p, "opts", []) for p in command.params):
            found.add(" ".join(path))

    walk(get_command(app), [])
    return found


@pytest.fixture
def seeded():
    from tests.ledger_factories import seed_ledger, seed_settings_ledger

    return seed_settings_ledger(lambda session, settings: seed_ledger(session, settings.artifacts_dir))


def _git_repo(path):
    path.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.com"],
                 ["config", "user.name", "t"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", "-C", str(path), *argv], check=True, capture_output=True)
    return path


def test_every_json_verb_prints_only_json(capsys, seeded, tmp_path):
    log = tmp_path / "run.log"
    log.write_text('AXBGATE_STEP {"step": 0, "slowest_rank_step_s": 0.5, "rank_step_s": 0.5}\n')
    repo = _git_repo(tmp_path / "src")
    gate_id = str(seeded["accept"])
    calls: dict[str, list[str]] = {
        "verdict": ["--a", "0.4284", "--x", "0.4148", "--b", "0.4265", "--policy", "drift"],
        "import-log": [str(log)],
        "gate": ["--recipe", "tiny", "--no-wait", "--no-health"],
        "submit": ["--recipe", "tiny", "--no-health"],
        "show": [gate_id],
        "ledger": [],
        "decide": [gate_id, "--decision", "reject", "--reason", "+3 GiB"],
        "report": [gate_id],
        "token create": ["ci"],
        "token list": [],
        "repo add": [str(repo), "--recipe", "tiny", "--no-health"],
        "repo list": [],
        "repo show": ["1"],
        "repo webhook-secret": ["1"],
        "regate": ["--once"],
        "token revoke": ["ci"],
    }
    untested = _verbs_with_json() - set(calls) - {"watch"}  # watch: as gate (same printer)
    assert not untested, f"add these verbs to the test: {sorted(untested)}"
    for verb, args in calls.items():
        capsys.readouterr()
        code = main([*verb.split(), *args, "--json"])
        out = capsys.readouterr().out
        assert code in (0, 1), (verb, code)
        try:
            json.loads(out)
        except json.JSONDecodeError as exc:
            pytest.fail(f"axbgate {verb} --json printed more than JSON ({exc}): {out[:400]!r}")


def test_health_json_is_one_object_and_records_only_when_asked():
    env = {**os.environ}
    argv = [sys.executable, "-m", "orchestrator.app.cli", "health", "--nproc", "2", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)  # the whole stdout: nothing after the object
    assert report["verdict"] in ("healthy", "degraded") and "AXBGATE_" not in done.stdout
    with_records = subprocess.run([*argv, "--records"], capture_output=True, text=True, env=env,
                                  timeout=300, check=False)
    first, _, rest = with_records.stdout.partition("\n")
    assert json.loads(first)["verdict"] == report["verdict"]
    kinds = [line.split(" ", 1)[0] for line in rest.splitlines()]
    assert kinds[-1] == "AXBGATE_ALLOCATION" and "AXBGATE_HEALTH" in kinds
