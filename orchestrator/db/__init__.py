"""Database layer: ORM models, engine/session, migrations runner."""

from orchestrator.db.base import Base
from orchestrator.db.migrate import downgrade, upgrade
from orchestrator.db.session import build_engine, get_engine, session_scope

__all__ = ["Base", "build_engine", "downgrade", "get_engine", "session_scope", "upgrade"]
