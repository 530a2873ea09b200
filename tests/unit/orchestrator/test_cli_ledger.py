"""CLI ledger verbs in embedded mode (SQLite): token, show, ledger, decide, report."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.orm import Session

from orchestrator.app.cli import main


@pytest.fixture
def ledger_ids():
    from tests.ledger_factories import seed_ledger, seed_settings_ledger

    return seed_settings_ledger(lambda session, settings: seed_ledger(session, settings.artifacts_dir))


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
    assert main(["report", str(ledger_ids["accept"])]) == 0
    text = capsys.readouterr().out
    assert "## Gate #" in text and "-12.609 ms" in text and "**Decision:** reject" in text
    out = tmp_path / "REPORT.md"
    assert main(["report", "--tag", "qkv", "-o", str(out)]) == 0
    md = out.read_text()
    assert "### Stopping points" not in md or "| topology |" in md
    assert md.count(f"| #{ledger_ids['degraded']} |") == 1
    assert main(["show", "9999"]) == 2
    assert main(["report", "1", "--tag", "x"]) == 2


def test_report_gate_flag_is_a_deprecated_alias_of_the_argument(capsys, ledger_ids):
    gate_id = str(ledger_ids["accept"])
    capsys.readouterr()
    assert main(["report", gate_id]) == 0
    positional = capsys.readouterr()
    assert main(["report", "--gate", gate_id]) == 0
    flagged = capsys.readouterr()
    assert flagged.out == positional.out and "## Gate #" in flagged.out
    assert positional.err == ""
    assert f"`report --gate {gate_id}` is deprecated; use `axbgate report {gate_id}`" in flagged.err
    assert main(["report", gate_id, "--gate", str(int(gate_id) + 1)]) == 2
    assert "two gate ids given" in capsys.readouterr().err


def test_ledger_fits_80_columns_one_line_per_gate(ledger_ids):
    from rich.console import Console

    from orchestrator.app.cli.ledger import ledger_table
    from orchestrator.db.session import build_engine
    from orchestrator.schemas.views import GateFilters
    from orchestrator.settings import get_settings
    from orchestrator.usecases import views

    engine = build_engine(get_settings().database_url)
    with Session(engine) as session:
        page = views.list_gates(session=session, filters=GateFilters(limit=50))
    engine.dispose()
    console = Console(width=80, record=True, color_system=None)
    console.print(ledger_table(page))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.strip()[:1].isdigit()]
    assert len(rows) == page.count == len(ledger_ids)  # no row wraps onto a second line
    accepted = next(g for g in page.data if g.id == ledger_ids["accept"])
    row = next(line for line in rows if line.split()[0] == str(accepted.id))
    assert f"{accepted.delta_pct:+.2f}%" in row and f"{accepted.drift_pct:.2f}%" in row
    assert "accept" in row
    wide = Console(width=200, record=True, color_system=None)
    wide.print(ledger_table(page, wide=True))
    assert f"{accepted.delta_ms:+.3f} ms / {accepted.delta_pct:+.3f} %" in wide.export_text()


def test_version_and_help(capsys):
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"axbgate {version('axbgate')}"
    assert main(["submit", "--help"]) == 0
    help_text = capsys.readouterr().out
    for option in ("--recipe", "--command", "--control-env", "--measured-steps", "--policy", "--json"):
        assert option in help_text
    assert "│ --no-wait" not in help_text and "Example" in help_text
    for verb in (["gate"], ["ledger"], ["report"], ["regate"], ["serve"], ["show"], ["watch"],
                 ["decide"]):
        assert main([*verb, "--help"]) == 0
        assert "Example" in capsys.readouterr().out, verb


def test_submit_parses_the_gate_options_and_returns_at_once(capsys):
    import sys

    from tests.factories import HARNESS

    assert main(["submit", "--command", json.dumps([sys.executable, str(HARNESS), "{warmup_steps}",
                                                    "{measured_steps}"]),
                 "--measured-steps", "7", "--pattern", "A X B X A", "--policy", "drift", "--no-health", "--json"]) == 0
    gate = json.loads(capsys.readouterr().out)
    assert gate["status"] == "queued" and gate["num_measured_steps"] == 7
    assert gate["run_pattern"] == "A X B X A"
    assert main(["submit", "--measured-steps", "0", "--json"]) == 2


def test_progress_clock_of_each_run_counts_only_while_it_runs():
    import time

    from rich.progress import Progress, TimeElapsedColumn

    from orchestrator.app.cli.follow import track_run

    progress = Progress(TimeElapsedColumn(), disable=True)
    tasks: dict[int, int] = {}
    common = {"total": 7, "info": ""}
    track_run(progress, tasks, order=0, role="A", status="running", completed=1, **common)
    track_run(progress, tasks, order=1, role="X", status="pending", completed=0, **common)
    first, second = ({t.id: t for t in progress.tasks}[tasks[i]] for i in (0, 1))
    assert first.started and not second.started and second.elapsed is None
    time.sleep(0.2)
    track_run(progress, tasks, order=0, role="A", status="succeeded", completed=7, **common)
    track_run(progress, tasks, order=1, role="X", status="running", completed=0, **common)
    a_elapsed = first.elapsed
    assert a_elapsed >= 0.2
    time.sleep(0.2)
    assert first.elapsed == a_elapsed  # stopped when run A ended
    assert 0.2 <= second.elapsed < a_elapsed + 0.2  # run X's own clock, not the gate's


def test_show_prints_every_policy_with_interval_reason_and_disagreement(capsys, ledger_ids):
    from orchestrator.db.models import Verdict
    from orchestrator.db.session import build_engine
    from orchestrator.settings import get_settings

    gate_id = ledger_ids["accept"]
    engine = build_engine(get_settings().database_url)
    with Session(engine) as session:
        primary = session.query(Verdict).filter_by(gate_id=gate_id, is_primary=True).one()
        numbers = {**primary.numbers, "verdict": "inconclusive", "ci_low_pct": -7.25,
                   "ci_high_pct": 1.5, "reason": "the interval crosses zero"}
        session.add(Verdict(gate_id=gate_id, policy="ratio-ci", policy_version="1", params={},
                            verdict="inconclusive", numbers=numbers, is_primary=False))
        session.commit()
    engine.dispose()
    capsys.readouterr()
    assert main(["show", str(gate_id)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("| ratio-ci |"))
    assert "| inconclusive |" in row and "[-7.250, +1.500] %" in row and "the interval crosses zero" in row
    # the disagreement is generated from the two verdicts and their numbers (issue 25)
    assert ("**Policies disagree** on the same runs: drift (primary) said accept (delta -2.95 %, "
            "band +/-0.46 % set by the control drift); ratio-ci said inconclusive (delta -2.95 %, "
            "interval [-7.25, +1.50] %") in text
    assert "The primary policy (drift) decides: accept." in text and "20%" not in text
    # the allocation: job id, nodes and health verdict
    assert ("- allocation: slurm job 1001 on 1 node (gpu-node-01), 1x8 H200 NVLink, health healthy "
            "(results baseline-eligible)") in text
    assert "- measurement: 3 warmup + 6 measured steps; 3 runs; measured 3+6 steps" in text
    assert text.index("| drift (primary) |") < text.index("| ratio-ci |")
