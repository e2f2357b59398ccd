"""A logical backup of the whole database, and its restore (SPEC OPS-6).

``flask backup FILE`` writes every table's rows, read in one transaction (a consistent
snapshot on PostgreSQL and SQLite alike), as JSON lines; ``flask restore FILE`` loads
them into an empty database at the same migration. Columns are read as the database
holds them (tables reflected, not the models): sealed secrets stay sealed (OPS-3) and
audit rows keep their exact text, so the chain verifies after a restore.

The file is authenticated: its last line is an HMAC-SHA256 of every line before it
(the text, whatever the compression), under a key derived from ``AUDIT_CHAIN_KEY``.
Restore checks it before writing a row, so a file edited at rest (a role raised, a
decision changed, counts kept) is refused, and so is a file taken under another key.

What a backup does not hold: ``SECRET_KEY``, ``AUDIT_CHAIN_KEY`` and ``SECRETS_KEY``
(the instance's keys, never in the database) and the shipped audit checkpoints. Keep
them beside it (docs/backups.md).

File format (``.gz`` suffix: gzip), one JSON value per line::

    {"kind": "console_backup", "v": 1, "revision": "0021", "dialect": "postgresql", "taken_at": "…"}
    {"table": "installations", "columns": ["id", "slug", …]}
    ["inst-1", "default", …]                       one array per row, in column order
    …
    {"end": {"installations": 1, …}}             row counts
    {"mac": "hmac-sha256:<64 hex>"}               over the bytes of every line above

Values JSON cannot hold are tagged: ``{"$dt": iso}`` (datetime), ``{"$d": iso}`` (date),
``{"$dec": text}`` (Decimal), ``{"$b64": text}`` (bytes).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import hashlib
import hmac
import json
import zlib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from sqlalchemy import MetaData, Table, func, select, text
from sqlalchemy.engine import Connection

from app.domain.clock import iso, utcnow

KIND = "console_backup"
VERSION = 2  # 2: the trailer MAC line
BATCH = 1000
VERSION_TABLE = "alembic_version"
MAC_SCHEME = "hmac-sha256"
# What a broken file raises while it is read: a line cut in half (ValueError), a gzip
# stream cut short (EOFError) or corrupted (BadGzipFile, zlib.error), a line of the
# wrong shape (KeyError, TypeError).
UNREADABLE = (ValueError, EOFError, KeyError, TypeError, gzip.BadGzipFile, zlib.error)


class RestoreRefused(Exception):
    """The backup cannot be restored here; ``code`` names why, the message says what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# -- values ---------------------------------------------------------------------------


def encode_value(value: Any) -> Any:
    """A column value as JSON (tagged when JSON has no such type).

    Raises:
        TypeError: for a type no column of the console holds.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$d": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, bytes | memoryview):
        return {"$b64": base64.b64encode(bytes(value)).decode()}
    raise TypeError(f"cannot back up a value of type {type(value).__name__}")


def decode_value(value: Any) -> Any:
    """The inverse of ``encode_value``."""
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "$dt":
        return dt.datetime.fromisoformat(body)
    if tag == "$d":
        return dt.date.fromisoformat(body)
    if tag == "$dec":
        return Decimal(body)
    if tag == "$b64":
        return base64.b64decode(body)
    raise ValueError(f"unknown value tag {tag!r}")


# -- authentication -------------------------------------------------------------------


def backup_key(chain_key: bytes) -> bytes:
    """The key backups are MACed under: derived from ``AUDIT_CHAIN_KEY`` with its own
    label, so the chain key itself signs nothing but the chain (OPS-6)."""
    return hmac.new(chain_key, b"console-backup v2", hashlib.sha256).digest()


def _mac_line(mac: hmac.HMAC) -> str:
    return _line({"mac": f"{MAC_SCHEME}:{mac.hexdigest()}"})


def _authenticated_lines(path: Path, key: bytes) -> Iterator[bytes]:
    """The backup's lines (bytes, header included) before its MAC line; once they are
    all read, checks the MAC line against them.

    Raises:
        RestoreRefused: ``backup_incomplete`` when the file is cut short or unreadable
            (no MAC line at its end); ``backup_altered`` when the MAC does not match.
    """
    mac = hmac.new(key, digestmod=hashlib.sha256)
    try:
        with _open_bytes(path) as lines:
            held = None
            for line in lines:
                if held is not None:
                    mac.update(held)
                    yield held
                held = line
        trailer = json.loads(held) if held is not None and held.endswith(b"\n") else None
        stated = trailer.get("mac") if isinstance(trailer, dict) else None
    except UNREADABLE as error:
        raise RestoreRefused("backup_incomplete", f"{path} is cut short or corrupted: {error}") from error
    if not isinstance(stated, str):
        raise RestoreRefused("backup_incomplete", f"{path} is cut short: it does not end with its MAC line")
    if not hmac.compare_digest(stated, f"{MAC_SCHEME}:{mac.hexdigest()}"):
        raise RestoreRefused(
            "backup_altered",
            f"{path} was altered after it was written, or taken under another AUDIT_CHAIN_KEY: "
            "its MAC does not match; restore an intact copy with the key it was taken under",
        )


# -- schema ---------------------------------------------------------------------------


def _tables(conn: Connection) -> list[Table]:
    """The database's own tables (reflected), parents before children."""
    metadata = MetaData()
    metadata.reflect(bind=conn)
    return [table for table in metadata.sorted_tables if table.name != VERSION_TABLE]


def _revision(conn: Connection) -> str | None:
    try:
        return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    except Exception:  # no alembic_version table: a database never migrated
        return None


def _open(path: Path, mode: str, gz: bool | None = None) -> IO[str]:
    if path.suffix == ".gz" if gz is None else gz:
        return gzip.open(path, mode + "t", encoding="utf-8")
    return path.open(mode, encoding="utf-8")


def _open_bytes(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


# -- backup ---------------------------------------------------------------------------


class _MacWriter:
    """Writes lines to a text file and feeds their UTF-8 bytes to a MAC."""

    def __init__(self, file: IO[str], mac: hmac.HMAC) -> None:
        self.file, self.mac = file, mac

    def write(self, line: str) -> None:
        self.mac.update(line.encode("utf-8"))
        self.file.write(line)


def write_backup(conn: Connection, path: Path, key: bytes) -> dict[str, int]:
    """Write every table of the database behind ``conn`` to ``path`` (OPS-6).

    Args:
        conn: a connection not yet in a transaction; the whole read is one
            transaction (REPEATABLE READ, read only, on PostgreSQL), so rows written
            meanwhile are all in or all out.
        path: the file to write (gzip when it ends in ``.gz``); written beside and
            renamed into place at the end, so a failed backup leaves no file.
        key: the MAC key (``backup_key(AUDIT_CHAIN_KEY)``); the last line is the
            HMAC-SHA256 of all the lines before it.

    Returns:
        Rows written per table.

    Raises:
        RestoreRefused: ``not_migrated`` when the database has no migration version.
    """
    if conn.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    partial = path.with_name(path.name + ".partial")
    counts: dict[str, int] = {}
    with conn.begin():
        revision = _revision(conn)
        if revision is None:
            raise RestoreRefused("not_migrated", "the database has no alembic_version: nothing to back up")
        with _open(partial, "w", gz=path.suffix == ".gz") as file:
            mac = hmac.new(key, digestmod=hashlib.sha256)
            out = _MacWriter(file, mac)
            header = {"kind": KIND, "v": VERSION, "revision": revision, "dialect": conn.dialect.name}
            out.write(_line({**header, "taken_at": iso(utcnow())}))
            for table in _tables(conn):
                columns = [column.name for column in table.columns]
                out.write(_line({"table": table.name, "columns": columns}))
                order = list(table.primary_key.columns) or list(table.columns)
                result = conn.execution_options(stream_results=True, yield_per=BATCH).execute(
                    select(table).order_by(*order)
                )
                counts[table.name] = 0
                for row in result:
                    out.write(_line([encode_value(value) for value in row]))
                    counts[table.name] += 1
            out.write(_line({"end": counts}))
            file.write(_mac_line(mac))
    partial.replace(path)
    return counts


# -- restore --------------------------------------------------------------------------


def read_header(path: Path) -> dict[str, Any]:
    """The backup's first line, checked to be a console backup.

    Raises:
        RestoreRefused: ``not_a_backup``.
    """
    try:
        with _open(path, "r") as lines:
            header = json.loads(lines.readline())
    except (OSError, ValueError, EOFError) as error:
        raise RestoreRefused("not_a_backup", f"{path} is not a console backup: {error}") from error
    if not isinstance(header, dict) or header.get("kind") != KIND or header.get("v") != VERSION:
        raise RestoreRefused("not_a_backup", f"{path} is not a console backup (version {VERSION})")
    return header


def _sections(lines: Iterator[bytes], path: Path) -> Iterator[tuple[str, list[str], list[list[Any]]]]:
    """(table, columns, rows of one batch) in file order; checks the end line's counts."""
    next(lines)
    table, columns, batch, seen, ended = None, [], [], {}, None
    for number, line in enumerate(lines, start=2):
        value = json.loads(line)
        if isinstance(value, list):
            if table is None:
                raise RestoreRefused("not_a_backup", f"line {number}: a row before any table")
            batch.append(value)
            seen[table] += 1
            if len(batch) >= BATCH:
                yield table, columns, batch
                batch = []
            continue
        if table is not None and batch:
            yield table, columns, batch
            batch = []
        if "end" in value:
            ended = value["end"]
            continue
        table, columns = value["table"], value["columns"]
        seen[table] = 0
    if ended is None or ended != seen:
        raise RestoreRefused(
            "backup_incomplete", f"{path} is cut short or altered: its end line does not match its rows"
        )


def _checked_sections(path: Path, key: bytes) -> Iterator[tuple[str, list[str], list[list[Any]]]]:
    """``_sections`` of the file's authenticated lines; a line of the wrong shape is
    refused as incomplete, and the MAC is checked again as the rows are read (the
    file could change between the check before the transaction and this read)."""
    try:
        yield from _sections(_authenticated_lines(path, key), path)
    except UNREADABLE as error:
        raise RestoreRefused("backup_incomplete", f"{path} is cut short or altered: {error}") from error


def verify_backup(path: Path, key: bytes) -> None:
    """Read the whole backup and check its MAC line, writing nothing (OPS-6).

    Raises:
        RestoreRefused: ``backup_incomplete`` or ``backup_altered`` (see
            ``_authenticated_lines``).
    """
    for _ in _authenticated_lines(path, key):
        pass


def _nonempty_tables(conn: Connection, tables: list[Table]) -> list[str]:
    return [t.name for t in tables if conn.execute(select(func.count()).select_from(t)).scalar()]


def restore_backup(conn: Connection, path: Path, key: bytes) -> dict[str, int]:
    """Load a backup into the empty database behind ``conn`` in one transaction (OPS-6).

    Args:
        conn: a connection to a database migrated to the backup's revision
            (``flask db upgrade <revision>``) with no rows.
        path: a file written by ``write_backup``.
        key: the MAC key it was written under (``backup_key(AUDIT_CHAIN_KEY)``); the
            MAC is checked before any row is written.

    Returns:
        Rows restored per table.

    Raises:
        RestoreRefused: ``not_a_backup``, ``backup_incomplete`` (cut short or
            unreadable), ``backup_altered`` (the MAC does not match: edited, or
            another key),
            ``revision_mismatch`` (the database is at another migration),
            ``database_not_empty``, ``unknown_table`` / ``unknown_column`` (the
            schema is not the one the backup was taken from).
    """
    header = read_header(path)
    counts: dict[str, int] = {}
    with conn.begin():
        revision = _revision(conn)
        if revision != header["revision"]:
            raise RestoreRefused(
                "revision_mismatch",
                f"the backup was taken at migration {header['revision']}, this database is at "
                f"{revision or 'no migration'}: "
                f"restore into an empty database migrated with `flask --app app db upgrade {header['revision']}`",
            )
        tables = {table.name: table for table in _tables(conn)}
        if busy := _nonempty_tables(conn, list(tables.values())):
            raise RestoreRefused(
                "database_not_empty",
                f"the database already has rows in {', '.join(busy)}: restore only into an empty database",
            )
        verify_backup(path, key)  # the whole file, before the first row is written
        for name, columns, rows in _checked_sections(path, key):
            table = tables.get(name)
            if table is None:
                raise RestoreRefused("unknown_table", f"the backup has table {name}, which this database lacks")
            if missing := [c for c in columns if c not in table.columns]:
                raise RestoreRefused("unknown_column", f"table {name} here has no column {', '.join(missing)}")
            conn.execute(table.insert(), [dict(zip(columns, map(decode_value, row), strict=True)) for row in rows])
            counts[name] = counts.get(name, 0) + len(rows)
    return counts
