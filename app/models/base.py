"""Declarative base, column types and helpers shared by every table."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, MetaData, String, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.domain.clock import utcnow

# Stable constraint names, so migrations behave the same on SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator):
    """Aware UTC datetimes in and out, whatever the database keeps.

    SQLite has no time zones: values are stored as naive UTC text and given back
    their UTC zone when read, so comparisons in SQL and in Python agree.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def new_id(prefix: str) -> str:
    """A random id with a readable prefix, e.g. ``rep_3f1c...``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def id_column(prefix: str) -> Mapped[str]:
    return mapped_column(String(200), primary_key=True, default=lambda: new_id(prefix))


def created_at_column() -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), default=utcnow, nullable=False)


def loads(text: str | None, default: Any = None) -> Any:
    """Parse a stored JSON column; a missing value gives `default`."""
    if text is None or text == "":
        return default
    return json.loads(text)


def insert_ignore(session, model, values: dict[str, Any]) -> bool:
    """INSERT a row unless one with the same unique key exists (no error, no race).

    Returns:
        True when the row was inserted.
    """
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = insert(model).values(**values).on_conflict_do_nothing()
    return session.execute(statement).rowcount == 1
