"""Declarative base with a constraint-naming convention (so Alembic diffs are stable)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import JSON, BigInteger, DateTime, Integer, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

__all__ = ["Base", "JSONType", "utcnow"]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")
"""JSON column type: JSONB on PostgreSQL, JSON text on SQLite."""


def utcnow() -> dt.datetime:
    """Return the current time as an aware UTC datetime."""
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    """Base class of every ORM model."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        dict: JSONType,
        list: JSONType,
        # SQLite only auto-increments INTEGER PRIMARY KEY, so BIGINT becomes INTEGER there.
        int: BigInteger().with_variant(Integer(), "sqlite"),
        dt.datetime: DateTime(timezone=True),
    }
