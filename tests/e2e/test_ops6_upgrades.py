"""Upgrades rehearsed (SPEC OPS-6): a database at every earlier migration, with data,
upgrades to the latest with its data intact and its audit chain verifying.

For each migration R on disk before the head (found, not listed: new ones join by
themselves): a fresh database is upgraded to R with `flask db upgrade R`, every table
that exists at R gets rows (columns filled by type, foreign keys pointing at the
parent rows, audit rows forming a valid chain under AUDIT_CHAIN_KEY), then
`flask db upgrade` takes it to the head. Every row written is still there with its
values (read through the head's models, so a column a migration seals reads back as
written), and `flask verify-audit` is clean.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Boolean, Date, DateTime, Float, Integer, MetaData, Numeric, create_engine, select, text

from app.domain.audit_chain import GENESIS_HASH, keyed_row_hash
from app.domain.clock import iso
from app.domain.digests import canonical_json
from app.extensions import db

from .databases import Ladder, app_on, fresh_database, revisions, run_cli

ROWS = 2  # per table: enough for foreign keys and unique columns to tell rows apart
START = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
# `state IN ('a', …)` as written, and as PostgreSQL gives it back: `(state)::text = ANY ((ARRAY['a'::…`
CHECK_IN = re.compile(r"(\w+)\)?(?:::text)?\s+(?:IN\s*\(|=\s*ANY\s*\(\(?ARRAY\[)\s*'([^']*)'", re.I)
EARLIER = revisions()[:-1]


def _choices(table) -> dict[str, str]:
    """column -> an allowed value, from CHECK (column IN ('a', …)) constraints."""
    found = {}
    for constraint in table.constraints:
        sqltext = getattr(constraint, "sqltext", None)
        if sqltext is not None:
            found.update(dict(CHECK_IN.findall(str(sqltext))))
    return found


def _value(table, column, i: int, choices: dict[str, str]):
    kind = column.type
    head = db.metadata.tables.get(table.name)
    if head is not None and column.name in head.c and not getattr(head.c[column.name].type, "plain_allowed", True):
        return None  # a column born sealed holds only what the console sealed (OPS-3): nothing written here
    if column.name in choices:
        return choices[column.name]
    if isinstance(kind, Boolean):
        return i % 2 == 0
    if isinstance(kind, Integer):
        return i + 1
    if isinstance(kind, Float | Numeric):
        return i + 0.5
    if isinstance(kind, DateTime):
        return START + timedelta(minutes=i)
    if isinstance(kind, Date):
        return date(2026, 1, 2 + i)
    if column.name.endswith("_json"):
        return canonical_json({"rehearsal": i})
    text = f"{table.name[:12]}.{column.name[:12]}.{i}.{uuid.uuid4().hex[:8]}"
    length = getattr(kind, "length", None)
    return text[-length:] if length else text


def _audit_rows(installation_ids: list[str], key: bytes) -> list[dict]:
    """Two keyed audit rows per installation, chained as the console chains them (REC-3)."""
    rows = []
    for n, installation_id in enumerate(installation_ids):
        prev = GENESIS_HASH
        for seq in (1, 2):
            created = START + timedelta(seconds=10 * n + seq)
            material = {
                "installation_id": installation_id,
                "seq": seq,
                "idempotency_key": f"rehearsal:{installation_id}:{seq}",
                "action": "rehearsal.written",
                "actor_type": "system",
                "actor_id": "rehearsal",
                "target_type": "installation",
                "target_id": installation_id,
                "details_json": canonical_json({"seq": seq}),
                "created_at": iso(created),
            }
            row_hash = keyed_row_hash(prev, material, key)
            row = {**material, "id": f"audit-{n}-{seq}", "created_at": created}
            rows.append({**row, "prev_hash": prev, "row_hash": row_hash})
            prev = row_hash
    return rows


def fill(url: str, key: bytes) -> dict[str, dict[str, dict]]:
    """Write ROWS rows into every table of the database at `url`, parents first.

    Returns:
        {table: {primary key text: {column: value written}}}.
    """
    engine = create_engine(url)
    metadata = MetaData()
    metadata.reflect(bind=engine)
    written: dict[str, list[dict]] = {}
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            if table.name == "alembic_version":
                continue
            if table.name == "audit_events":
                rows = _audit_rows([row["id"] for row in written["installations"]], key)
            else:
                choices = _choices(table)
                rows = []
                for i in range(ROWS):
                    row = {}
                    for column in table.columns:
                        fks = [fk for fk in column.foreign_keys if fk.column.table.name != table.name]
                        if fks:
                            parent = written[fks[0].column.table.name][i]
                            row[column.name] = parent[fks[0].column.name]
                        elif column.foreign_keys:  # a row referring to another row of its table
                            row[column.name] = None
                        else:
                            row[column.name] = _value(table, column, i, choices)
                    rows.append(row)
            conn.execute(table.insert(), rows)
            written[table.name] = rows
    engine.dispose()
    return {
        name: {_key(metadata.tables[name], row): row for row in rows} for name, rows in written.items()
    }


def _key(table, row: dict) -> str:
    return "|".join(str(row[c.name]) for c in table.primary_key.columns)


def _same(written, read) -> bool:
    if isinstance(written, datetime) and isinstance(read, datetime):
        as_utc = [v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC) for v in (written, read)]
        return as_utc[0] == as_utc[1]
    if isinstance(written, str) and isinstance(read, dict | list):  # a JSON column read as its value
        return canonical_json(read) == written
    return written == read


# The values a migration changes on purpose, with what it does: (table, column) → (the
# migration, the change). Crossing that migration, the value must have changed just so.
INTENDED = {
    # 0019 ends every session opened with a password alone (OPS-2: sign in again, with a second factor)
    ("operator_users", "session_version"): ("0019", lambda before, after: after == before + 1),
}


def changed_rows(written: dict[str, dict[str, dict]], revision: str) -> list[str]:
    """Every row or value written at `revision` that reads back otherwise at the head,
    through the models' column types (the app context's database), but for the changes
    in INTENDED of the migrations after `revision`."""
    problems = []
    for name, rows in written.items():
        table = db.metadata.tables.get(name)
        if table is None:
            problems.append(f"table {name} is gone")
            continue
        found = {_key(table, row._mapping): row._mapping for row in db.session.execute(select(table))}
        for key, row in rows.items():
            now = found.get(key)
            if now is None:
                problems.append(f"{name} {key}: row is gone")
                continue
            for column, value in row.items():
                if column not in now:
                    problems.append(f"{name}.{column}: column is gone")
                elif (name, column) in INTENDED and revision < INTENDED[name, column][0]:
                    if not INTENDED[name, column][1](value, now[column]):
                        problems.append(f"{name} {key}: {column} was {value!r}, is {now[column]!r} (not as intended)")
                elif not _same(value, now[column]):
                    problems.append(f"{name} {key}: {column} was {value!r}, is {now[column]!r}")
    db.session.rollback()
    return problems


def version_of(url: str) -> str:
    engine = create_engine(url)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    return version


@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> Ladder:
    return Ladder(tmp_path_factory.mktemp("ops6-ladder"))


@pytest.mark.parametrize("revision", EARLIER)
def test_ops6_a_database_at_each_earlier_migration_upgrades_with_its_data_and_chain(revision, ladder, tmp_path):
    """OPS-6: a database at `revision` (migrated from empty with `flask db upgrade
    <revision>`), with a row in every table and a keyed audit chain, upgrades to the
    head with `flask db upgrade`; every row and value is still there and `flask
    verify-audit` is clean."""
    url = ladder.copy_at(revision, tmp_path)
    app = app_on(url, tmp_path)
    assert version_of(url) == revision
    written = fill(url, app.config["AUDIT_CHAIN_KEY"].encode())

    upgraded = run_cli(app, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    with app.app_context():
        assert changed_rows(written, revision) == []
        db.session.remove()
        db.engine.dispose()
    verified = run_cli(app, "verify-audit")
    assert verified.exit_code == 0, verified.output
    assert verified.output.count(": ok (2 rows") == ROWS, verified.output


def test_ops6_the_rehearsal_covers_every_migration_on_disk():
    """OPS-6: the revisions rehearsed are those in migrations/versions, bar the head."""
    files = sorted(Path(__file__).resolve().parents[2].glob("migrations/versions/*.py"))
    assert len(EARLIER) == len(files) - 1
    assert EARLIER[0] == revisions()[0] and revisions()[-1] not in EARLIER


def test_ops6_the_upgrade_steps_of_docs_upgrades_run_as_written(tmp_path):
    """OPS-6: docs/upgrades.md's ```bash block, read from the page and run in a shell on a
    database at the first migration with data: it notes the migration, backs up,
    upgrades to the head and verifies the chain, each step exiting 0."""
    from .test_ops6_backups import doc_blocks, shell

    (block,) = doc_blocks(Path(__file__).resolve().parents[2] / "docs" / "upgrades.md")
    url = fresh_database(tmp_path, "ops6_upgrade")
    app = app_on(url, tmp_path)
    assert run_cli(app, "db", "upgrade", EARLIER[0]).exit_code == 0
    fill(url, app.config["AUDIT_CHAIN_KEY"].encode())
    work = tmp_path / "ops"
    work.mkdir()

    ran = shell(block, work, DATABASE_URL=url, INSTANCE_PATH=str(tmp_path))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{EARLIER[0]}" in ran.stdout.splitlines()[0]
    assert (work / "before-upgrade.jsonl.gz").exists()
    assert ran.stdout.count(": ok (2 rows") == ROWS, ran.stdout
    assert version_of(url) == revisions()[-1]
