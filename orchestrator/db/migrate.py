"""Run the Alembic migrations in ``migrations/`` (the only way the schema changes)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations

__all__ = [
    "alembic_config",
    "current_revision",
    "downgrade",
    "ensure_schema",
    "head_revision",
    "upgrade",
]


def alembic_config(url: str) -> Config:
    """Build an Alembic config for ``url`` without an ini file.

    Args:
        url: SQLAlchemy database URL.

    Returns:
        The :class:`alembic.config.Config` pointing at the packaged ``migrations``.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (default: the newest)."""
    sqlite_file = None
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        sqlite_file = Path(url.split("///", 1)[1])
        sqlite_file.parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(url), revision)
    if sqlite_file is not None and sqlite_file.exists():
        # The ledger holds gate env values and webhook secrets: owner-only (docs/security.md).
        try:
            sqlite_file.chmod(0o600)
        except OSError:
            pass


def downgrade(url: str, revision: str = "base") -> None:
    """Revert migrations down to ``revision`` (default: an empty schema)."""
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """Return the revision the database is at, or ``None`` for an empty database."""
    from alembic.runtime.migration import MigrationContext

    from orchestrator.db.session import build_engine

    engine = build_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str:
    """Return the newest revision in ``migrations/versions``."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None
    return head


def ensure_schema(url: str) -> None:
    """Make sure the database is at the newest revision before use.

    The embedded SQLite ledger is upgraded automatically (a newcomer never has to run
    ``axbgate db upgrade``); a shared PostgreSQL ledger is never changed implicitly.

    Raises:
        RuntimeError: A non-SQLite database is not at the head revision; the message
            says to run ``axbgate db upgrade``.
    """
    current = current_revision(url)
    head = head_revision()
    if current == head:
        return
    if url.startswith("sqlite"):
        upgrade(url)
        return
    raise RuntimeError(
        f"database schema is at revision {current!r}, this axbgate needs {head!r}: "
        "run `axbgate db upgrade` first"
    )
