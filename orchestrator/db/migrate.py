"""Run the Alembic migrations in ``migrations/`` (the only way the schema changes).

Every schema change runs under one lock per database, so processes started at once on a
fresh ledger (ten ``axbgate gate`` commands, a server and a CLI) migrate it exactly once
and the others wait: a file lock (``flock``) next to an SQLite file, a session-level
``pg_advisory_lock`` on PostgreSQL. Alembic re-reads the revision once the lock is held.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
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
    "migration_lock",
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


_PG_LOCK_KEY = int.from_bytes(hashlib.sha256(b"axbgate schema migrations").digest()[:8], "big",
                              signed=True)
"""Advisory-lock key of schema changes on PostgreSQL (any 64-bit number no one else uses)."""


def _sqlite_file(url: str) -> Path | None:
    if not url.startswith("sqlite") or "///" not in url:
        return None
    path = url.split("///", 1)[1].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path)


@contextlib.contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """Hold the database's schema-change lock for the block (blocks until it is free).

    SQLite: ``flock`` on ``<database file>.migrate.lock`` (the folder is created).
    PostgreSQL: ``pg_advisory_lock`` on a connection of its own, released at the end.
    In-memory SQLite needs none.
    """
    sqlite_file = _sqlite_file(url)
    if sqlite_file is not None:
        sqlite_file.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{sqlite_file}.migrate.lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return
    if not url.startswith("postgresql"):
        yield
        return
    from sqlalchemy import create_engine, pool, text

    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
    finally:
        engine.dispose()


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (default: the newest), under
    :func:`migration_lock`; a database already there is left alone. A SQLite ledger file is
    made owner-only: it holds gate env values and webhook secrets (docs/security.md)."""
    with migration_lock(url):
        command.upgrade(alembic_config(url), revision)
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        sqlite_file = Path(url.split("///", 1)[1])
        if sqlite_file.exists():
            try:
                sqlite_file.chmod(0o600)
            except OSError:
                pass


def downgrade(url: str, revision: str = "base") -> None:
    """Revert migrations down to ``revision`` (default: an empty schema), under
    :func:`migration_lock`."""
    with migration_lock(url):
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
    ``axbgate db upgrade``), under :func:`migration_lock`, so any number of processes
    may do this at once on a fresh file; a shared PostgreSQL ledger is never changed
    implicitly.

    Raises:
        RuntimeError: A non-SQLite database is not at the head revision; the message
            says to run ``axbgate db upgrade``.
    """
    head = head_revision()
    if current_revision(url) == head:
        return
    with migration_lock(url):  # another process may be migrating it right now: wait, re-read
        current = current_revision(url)
        if current == head:
            return
        if url.startswith("sqlite"):
            command.upgrade(alembic_config(url), "head")
            return
    raise RuntimeError(
        f"database schema is at revision {current!r}, this axbgate needs {head!r}: "
        "run `axbgate db upgrade` first"
    )
