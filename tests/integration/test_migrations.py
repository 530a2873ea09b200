"""Migrations up and down on SQLite and the real PostgreSQL; models match the schema."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from orchestrator.db.base import Base
from orchestrator.db.migrate import current_revision, downgrade, head_revision, upgrade

TABLES = {
    "allocations", "health_checks", "gates", "runs", "run_steps", "artifacts",
    "verdicts", "decisions", "tracked_repositories", "api_tokens",
    "repo_events", "bisections", "webhook_deliveries", "webhook_attempts",
    "scheduler_leases", "apscheduler_jobs", "semantic_verdicts",
}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _check_up_down(url: str) -> None:
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == head_revision()
    assert _tables(url) == TABLES
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == [], f"models and migrations disagree: {diff}"
    downgrade(url, "base")
    assert current_revision(url) is None
    assert _tables(url) == set()
    upgrade(url)  # and up again
    assert _tables(url) == TABLES


def test_migrations_up_down_sqlite(sqlite_url):
    _check_up_down(sqlite_url)


@pytest.mark.postgres
def test_migrations_up_down_postgres(postgres_url):
    _check_up_down(postgres_url)
