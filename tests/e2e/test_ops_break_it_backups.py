"""Break-it findings on backups, restores and upgrades (SPEC OPS-6, OPS-2).

Each was found by a break-it pass as an xfail(strict=True) test and is fixed now: the
tests hold the fixes."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime

from sqlalchemy import MetaData, create_engine, insert

from app.extensions import db
from app.services.backup import _nonempty_tables, _tables, backup_key, verify_backup, write_backup
from app.services.uow import chain_key

from .databases import app_on, fresh_database, run_cli


def backup_of_world(tmp_path):
    path = tmp_path / "console-backup.jsonl.gz"
    with db.engine.connect() as conn:
        write_backup(conn, path, backup_key(chain_key()))
    return path


def empty_database_at_head(tmp_path):
    url = fresh_database(tmp_path, "breakit_restore")
    app = app_on(url, tmp_path)
    upgraded = run_cli(app, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    return app


def test_ops6_break_it_an_edited_backup_is_refused(app, world, tmp_path):
    """A backup file edited at rest (operator_users.roles of the moderator set to
    ``admin,moderator``, row counts unchanged) must be refused (``backup_altered``: its
    MAC line no longer matches) and leave the database empty, as docs/backups.md
    promises for an altered file."""
    lines = gzip.open(backup_of_world(tmp_path), "rt").read().splitlines()
    edited, table, columns = [], None, []
    for line in lines:
        value = json.loads(line)
        if isinstance(value, dict) and "table" in value:
            table, columns = value["table"], value["columns"]
        elif isinstance(value, list) and table == "operator_users":
            row = dict(zip(columns, value, strict=True))
            if row["email"] == "moderator@example.com":
                row["roles"] = "admin,moderator"
                line = json.dumps([row[c] for c in columns])
        edited.append(line)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(edited) + "\n")
    intact = tmp_path / "intact.jsonl"  # the control: the same text unedited, uncompressed, verifies
    intact.write_text("\n".join(lines) + "\n")
    verify_backup(intact, backup_key(chain_key()))
    restored_app = empty_database_at_head(tmp_path)
    restored = run_cli(restored_app, "restore", str(path))
    assert restored.exit_code == 1 and "backup_altered" in restored.output, restored.output
    assert_empty(restored_app)


def test_ops6_break_it_a_corrupted_gzip_backup_is_refused_as_incomplete(app, world, tmp_path):
    """A ``.gz`` backup whose first gzip member (header line and first tables) is
    intact and whose second member's deflate data is broken (what a flipped bit on
    disk gives): restore answers ``backup_incomplete`` (exit 1), not an unhandled
    ``zlib.error``."""
    lines = gzip.open(backup_of_world(tmp_path), "rb").read().splitlines(keepends=True)
    half = len(lines) // 2
    broken = bytearray(gzip.compress(b"".join(lines[half:]), mtime=0))
    broken[10] = 0x07  # the first deflate block: final, of the reserved type 3
    path = tmp_path / "corrupted.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(lines[:half]), mtime=0) + bytes(broken))
    restored = run_cli(empty_database_at_head(tmp_path), "restore", str(path))
    assert isinstance(restored.exception, SystemExit), repr(restored.exception)
    assert restored.exit_code == 1 and "backup_incomplete" in restored.output, restored.output


def assert_empty(app):
    """No table of the app's database has a row (`restore` wrote nothing)."""
    with app.app_context():
        with db.engine.connect() as conn:
            assert not _nonempty_tables(conn, _tables(conn))
        db.engine.dispose()


def test_ops2_break_it_sessions_opened_before_the_upgrade_need_the_second_factor(tmp_path):
    """A database at 0018 with a reviewer (password only) whose browser holds a session
    (``<id>:<session version>``, what Flask-Login stored then); after `flask db upgrade`
    to the head that session must not open reviewer pages until a second factor is
    passed (302 to the sign-in page)."""
    url = fresh_database(tmp_path, "breakit_upgrade")
    assert run_cli(app_on(url, tmp_path), "db", "upgrade", "0018").exit_code == 0
    engine = create_engine(url)
    metadata = MetaData()
    metadata.reflect(bind=engine, only=["installations", "operator_users"])
    now = datetime.now(UTC)
    with engine.begin() as conn:
        conn.execute(insert(metadata.tables["installations"]).values(
            id="ins-old", name="Old", slug="old", created_at=now))
        conn.execute(insert(metadata.tables["operator_users"]).values(
            id="op-oldrev", installation_id="ins-old", email="oldrev@example.com", password_hash="x",
            display_name="Old reviewer", roles="reviewer", active=True, session_version=1, created_at=now))
    engine.dispose()
    app = app_on(url, tmp_path)
    upgraded = run_cli(app, "db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    with app.app_context():
        client = app.test_client()
        with client.session_transaction() as session:
            session["_user_id"], session["_fresh"] = "op-oldrev:1", True
        response = client.get("/proposals")
        db.session.remove()
        db.engine.dispose()
    assert response.status_code == 302 and "/login" in response.headers["Location"], response.status_code
