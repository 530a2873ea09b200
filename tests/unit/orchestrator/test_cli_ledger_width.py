"""``axbgate ledger`` in a real process: readable at 80 columns and when piped (the columns that
fit are chosen, ids, result and delta never cut); ``--wide | cat`` never cut (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

LONG_TITLE = "fused rmsnorm with a long explanatory title that never fits"


@pytest.fixture
def many_gates():
    """Twelve gates, so ids reach two digits; the last has a long title."""
    from tests.ledger_factories import (
        WORKED_ACCEPT,
        finish_gate,
        make_gate,
        seed_ledger,
        seed_settings_ledger,
    )

    def fill(session, _settings):
        seed_ledger(session)
        seed_ledger(session)
        gid = make_gate(session, title=LONG_TITLE, family="ltx2-norm")
        finish_gate(session, gid, medians_s=WORKED_ACCEPT)
        return gid

    return seed_settings_ledger(fill)


def _ledger(*args: str, columns: int | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run([sys.executable, "-m", "orchestrator.app.cli", "ledger", *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.strip()[:1].isdigit()}


@pytest.mark.parametrize("columns", [80, None])  # COLUMNS=80, and a plain pipe
def test_ledger_at_80_columns_keeps_ids_result_and_delta_whole(many_gates, columns):
    text = _ledger(columns=columns)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = _rows(text)
    assert len(rows) == 11 and str(many_gates) in rows and "10" in rows  # two-digit ids whole
    row = rows[str(many_gates)]
    assert " accept " in row and "-2.95%" in row  # result and delta never cut
    assert "0.46%" in row  # drift fits too
    assert "…" not in row.split("fused")[0]  # nothing before the title is shortened
    header = next(line for line in lines if line.lstrip().startswith("gate"))
    for name in ("gate", "result", "delta", "drift", "decision"):
        assert name in header.split()


def test_ledger_at_120_columns_shows_more_of_the_title(many_gates):
    narrow = _rows(_ledger(columns=80))[str(many_gates)]
    wide = _rows(_ledger(columns=120))[str(many_gates)]
    assert len(wide) <= 120 and LONG_TITLE[:30] in wide and LONG_TITLE[:30] not in narrow
    assert "X / A,B" in _ledger(columns=120)


def test_ledger_wide_piped_is_never_cut(many_gates):
    text = _ledger("--wide", columns=None)  # stdout is a pipe, as in `axbgate ledger --wide | cat`
    row = _rows(text)[str(many_gates)]
    assert LONG_TITLE in row and "-12.609 ms / -2.950 %" in row and "0.455 %" in row
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.lstrip().startswith("gate"))
    for name in ("kind", "topology", "eligible"):
        assert name in header.split()
