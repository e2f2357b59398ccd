"""Engine behaviour that differs between SQLite and PostgreSQL.

SQLite (the embedded default) has a single writer. A unit of work that will write
starts with ``BEGIN IMMEDIATE`` so it takes the write lock up front and waits for
it (busy timeout), instead of failing halfway with a stale snapshot; reads start
with a plain deferred ``BEGIN``. WAL mode lets reads run beside the writer.
"""

from __future__ import annotations

import contextvars
import sqlite3

from sqlalchemy import event
from sqlalchemy.engine import Engine

write_intent: contextvars.ContextVar[bool] = contextvars.ContextVar("write_intent", default=False)

_installed = False


def install_engine_hooks() -> None:
    """Register the SQLite connection and transaction hooks (once per process)."""
    global _installed
    if _installed:
        return
    _installed = True

    @event.listens_for(Engine, "connect")
    def _sqlite_connect(dbapi_connection, _record) -> None:
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        # Let SQLAlchemy's "begin" hook, not the driver, open transactions.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(Engine, "begin")
    def _sqlite_begin(connection) -> None:
        if connection.dialect.name != "sqlite":
            return
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write_intent.get() else "BEGIN")
