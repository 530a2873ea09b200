"""Shared fixtures: an isolated data directory and settings per test, databases."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_ADMIN_URL = os.environ.get("AXBGATE_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")


REPO_ROOT = Path(__file__).resolve().parents[1]
_TREE_GUARD_IGNORED = (".venv/", ".pytest_cache/", ".ruff_cache/", ".mypy_cache/", ".coverage")
"""Paths a test run may create in the working tree (tool caches and the virtual environment)."""


def _tree_status() -> set[str] | None:
    """``git status --porcelain`` lines of the repository (None when it is not a git tree)."""
    try:
        done = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                               "--untracked-files=all"], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {line for line in done.stdout.splitlines()
            if not line[3:].startswith(_TREE_GUARD_IGNORED)}


@pytest.fixture(scope="session", autouse=True)
def _working_tree_unchanged():
    """No test writes into the working tree: the files ``git status`` reports as new or
    modified at the end of the session must have been so at its start (tests use
    ``tmp_path``; a Slurm job's output once landed at the root as ``slurm-*.out``)."""
    before = _tree_status()
    yield
    after = _tree_status()
    if before is None or after is None:
        return
    appeared = sorted(after - before)
    if appeared:
        pytest.fail("tests wrote into the working tree (write under tmp_path instead): "
                    + ", ".join(appeared), pytrace=False)


@pytest.fixture(autouse=True)
def _isolated_settings(tmp_path, monkeypatch):
    """Every test gets its own data dir (embedded SQLite ledger, artifacts)."""
    from orchestrator.settings import get_settings

    for key in list(os.environ):
        if key.startswith("AXBGATE_") and not key.startswith("AXBGATE_TEST_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AXBGATE_DATA_DIR", str(tmp_path / "axbgate-data"))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """URL of a fresh SQLite file (no schema yet)."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database on 127.0.0.1:5432, dropped afterwards.

    Fails (not skips) when the server is unreachable: PostgreSQL is part of CI.
    """
    import psycopg

    name = f"axbgate_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        from orchestrator.db.session import get_engine

        get_engine.cache_clear()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> Iterator[str]:
    """A migrated database URL, once per backend (SQLite file and real PostgreSQL)."""
    from orchestrator.db.migrate import upgrade

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        upgrade(url)
        yield url
    else:
        url = request.getfixturevalue("postgres_url")
        upgrade(url)
        yield url


@pytest.fixture
def session(db_url):
    """A session on a migrated database (both backends); rolled back afterwards."""
    from sqlalchemy.orm import Session

    from orchestrator.db.session import build_engine

    engine = build_engine(db_url)
    with Session(engine, expire_on_commit=False) as s:
        yield s
        s.rollback()
    engine.dispose()


_WALL_TIME_REPORTS: list[str] = []


@pytest.fixture
def wall_time_report():
    """Append a line to the 'allocation wall time' section printed at the end of the run."""
    return _WALL_TIME_REPORTS.append


def pytest_terminal_summary(terminalreporter):
    """Print where real gates' allocation time went (measured steps vs overhead)."""
    if _WALL_TIME_REPORTS:
        terminalreporter.section("allocation wall time of real gates")
        for line in _WALL_TIME_REPORTS:
            terminalreporter.write_line(line)
