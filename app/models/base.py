"""Declarative base, column types and helpers shared by every table."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, MetaData, String, Text, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, make_transient_to_detached, mapped_column, relationship

from app.domain.clock import utcnow
from app.domain.digests import canonical_json

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


class SealedText(TypeDecorator):
    """A secret kept sealed at rest (SPEC OPS-3): plain ``str`` in Python, AES-GCM
    ciphertext in the column (`app.secret_box`), bound to ``context`` (``table.column``).

    Sealing and opening use the box of the current Flask app
    (``current_app.extensions["secret_box"]``), so the key never reaches the database.

    * A stored value that is still plain text (written before migration 0018) is given
      back as it is, so an installation reads its secrets until it is migrated;
      ``flask secrets-status`` counts such values and ``flask rotate-secrets-key``
      seals them. A column born sealed (``plain_allowed=False``: nothing plain was ever
      written there by the console) gives a plain value back as unreadable: only someone
      without the key could have written it.
    * A sealed value that no configured key opens is given back as an
      `app.secret_box.UnreadableSecret` (not a ``str``), so the row still loads: the
      console still shows the connection, and delivery fails with
      ``action_connection_secret_unreadable`` instead of a crash. Written back, it
      is stored unchanged.
    """

    impl = String(1000)
    cache_ok = True

    def __init__(self, context: str, length: int = 1000, *, plain_allowed: bool = True) -> None:
        super().__init__(length)
        self.context = context
        self.plain_allowed = plain_allowed

    @staticmethod
    def _box():
        from flask import current_app

        return current_app.extensions["secret_box"]

    def process_bind_param(self, value, dialect) -> str | None:
        from app.secret_box import UnreadableSecret

        if value is None:
            return None
        if isinstance(value, UnreadableSecret):
            return value.stored
        return self._box().seal(value, context=self.context)

    def process_result_value(self, value: str | None, dialect):
        from app.secret_box import SecretBoxError, UnreadableSecret, is_sealed

        if value is None:
            return value
        if not is_sealed(value):
            return value if self.plain_allowed else UnreadableSecret(value, f"{self.context} holds a value never sealed")
        try:
            return self._box().open(value, context=self.context)
        except SecretBoxError as error:
            return UnreadableSecret(value, str(error))


class SealedJSON(SealedText):
    """A JSON value kept sealed at rest (OPS-3): its canonical JSON text, sealed as
    `SealedText` does (e.g. a configuration change's new secrets waiting for approval).
    A value no key opens comes back as an `app.secret_box.UnreadableSecret`."""

    impl = Text
    cache_ok = True

    def __init__(self, context: str) -> None:
        TypeDecorator.__init__(self)
        self.plain_allowed = True
        self.context = context

    def process_bind_param(self, value, dialect) -> str | None:
        from app.secret_box import UnreadableSecret

        if value is None or isinstance(value, UnreadableSecret):
            return super().process_bind_param(value, dialect)
        return super().process_bind_param(canonical_json(value), dialect)

    def process_result_value(self, value: str | None, dialect):
        opened = super().process_result_value(value, dialect)
        return json.loads(opened) if isinstance(opened, str) else opened


class CanonicalJSON(TypeDecorator):
    """Python JSON values in and out, stored as RFC 8785 canonical JSON text.

    The stored text is exactly `canonical_json(value)`, the text the product wrote by
    hand into its ``*_json`` columns before this type existed, so no migration was
    needed and digests over the stored text still match (SPEC ID-2, RCPT-3).

    * Python None is SQL NULL (a column that must hold JSON ``null`` needs another
      design; none does).
    * JSON text given as a value is refused (TypeError): pass the value, not its
      JSON, or it would be stored as a JSON string.
    * Values canonical JSON cannot hold (NaN, infinities, integers beyond 2^53,
      lone surrogates) are refused when written (``rfc8785.CanonicalizationError``,
      raised inside SQLAlchemy's ``StatementError``).
    * Values are immutable by design: a dict or list changed in place is neither
      detected nor written. Assign a new value (``row.graph = {**row.graph, ...}``),
      or a deep copy changed, never the loaded object itself.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect) -> str | None:
        if value is None:
            return None
        if isinstance(value, str | bytes):
            raise TypeError("CanonicalJSON takes a Python value, not JSON text")
        return canonical_json(value)

    def process_result_value(self, value: str | None, dialect) -> Any:
        return None if value is None else read_json(value)


MAX_SAFE_INTEGER = 2**53 - 1
# An integer beyond 2^53 has at least 16 digits; text without such a run reads the same
# with the C decoder alone (no Python call per integer, as `_json_number` costs).
_LONG_DIGITS = re.compile(r"\d{16}")


def read_json(text: str) -> Any:
    """Stored canonical JSON as a Python value, integers as RFC 8785's number model
    reads them (`_json_number`)."""
    if _LONG_DIGITS.search(text) is None:
        return json.loads(text)
    return _NUMBER_MODEL.decode(text)


def _json_number(digits: str) -> int | float:
    """An integer as RFC 8785's number model (IEEE doubles) reads it.

    A large float such as 4.2e16 is stored as the digits ``42000000000000000``; read
    back as a Python int it would be refused when written again (beyond 2^53), so it
    comes back as the float it was.
    """
    number = int(digits)
    return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else float(number)


_NUMBER_MODEL = json.JSONDecoder(parse_int=_json_number)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def related(target: str | None = None, **options: Any):
    """A relationship for reading related rows, e.g. ``proposal.report``.

    Relationships here are view-only and never load lazily: rows are written by id
    through the services, and a query names what it reads with ``joinedload`` or
    ``selectinload``. Reading one that was not loaded raises instead of running a
    hidden query per row (``lazy="raise"``).

    The model modules import each other one way only (cases, then workflows, then
    proposals); a relationship against that order names its `target` class as a
    string and goes without a ``Mapped[...]`` annotation, which would need the import.
    """
    return relationship(target, viewonly=True, lazy="raise", **options)


def new_id(prefix: str) -> str:
    """A random id with a readable prefix, e.g. ``rep_3f1c...``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def id_column(prefix: str) -> Mapped[str]:
    return mapped_column(String(200), primary_key=True, default=lambda: new_id(prefix))


def created_at_column() -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), default=utcnow, nullable=False)


def updated_at_column() -> Mapped[datetime]:
    """Set when the row is inserted and again by every UPDATE that does not set it:
    ORM flushes and core ``update()`` statements alike (SQLAlchemy ``onupdate``)."""
    return mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow, nullable=False)


def json_column(name: str, *, nullable: bool = False, default: Any = None) -> Mapped[Any]:
    """A `CanonicalJSON` column named `name` (e.g. ``target_json``) in the table.

    Args:
        name: the column's name in the database; the mapped attribute has its own.
        default: a callable giving the value of a new row (e.g. ``dict``), or None.
    """
    return mapped_column(name, CanonicalJSON(), nullable=nullable, default=default)


def insert_ignore(session, model, values: dict[str, Any]) -> bool:
    """INSERT a row unless one with the same unique key exists (no error, no race).

    Returns:
        True when the row was inserted.
    """
    from .statements import column_keys, insert_ignore_statement, run

    statement = insert_ignore_statement(model, session.get_bind().dialect.name)
    # RETURNING tells whether it inserted (an ORM insert's rowcount is -1 through psycopg)
    return run(session, statement, column_keys(model, values)).first() is not None


def insert_known(session, model, values: dict[str, Any]):
    """`insert_ignore`, and when the row was inserted, that row as a persistent
    object of `session` built from `values` (no read): the transaction changes it
    like any loaded row, and `session.get` finds it while the caller holds it.

    Returns:
        The object, or None when a row with the same unique key existed.
    """
    if not insert_ignore(session, model, values):
        return None
    return attach_written(session, model, values)


def attach_written(session, model, values: dict[str, Any]):
    """The row `values` describe, as a persistent object of `session`, without a read
    (the caller wrote it, or will before the transaction commits)."""
    row = model(**values)
    make_transient_to_detached(row)
    # merge: a rolled-back try of this transaction may have left an expired copy
    return session.merge(row, load=False)
