"""Engine and session factory."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["build_engine", "get_engine", "session_scope"]


def build_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine for ``url``.

    SQLite gets foreign keys switched on, WAL journaling and a busy timeout so the API,
    the poller and the CLI can share the embedded file; its parent folder is created.

    Args:
        url: SQLAlchemy URL (``sqlite:///path`` or ``postgresql+psycopg://...``).
        echo: Log SQL statements.

    Returns:
        A new :class:`sqlalchemy.Engine`.
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # noqa: ANN001
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, echo=echo, pool_pre_ping=True)


@functools.lru_cache(maxsize=8)
def get_engine(url: str, echo: bool = False) -> Engine:
    """Return a cached engine per URL (one pool per process)."""
    return build_engine(url, echo=echo)


@contextlib.contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """Yield a session that commits on success and rolls back on error."""
    factory = sessionmaker(engine, expire_on_commit=False)
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
