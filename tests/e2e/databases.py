"""Fresh databases beside the test database, for upgrade and restore rehearsals (OPS-6).

SQLite: a new file. PostgreSQL: a database of its own named after the test database
(``<name>_<suffix>``, so runs with different TEST_DATABASE_URLs never meet), emptied
by dropping its schema.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from app import create_app
from app.extensions import db

from ..conftest import DATABASE_URL

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "migrations"


def fresh_database(tmp_path: Path, suffix: str) -> str:
    """The URL of an empty database (created, or emptied when it exists)."""
    if not DATABASE_URL:
        path = tmp_path / f"{suffix}.db"
        path.unlink(missing_ok=True)
        return f"sqlite:///{path}"
    from app.config import normalise_database_url

    base = make_url(normalise_database_url(DATABASE_URL))
    url = base.set(database=f"{base.database}_{suffix}")
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": url.database}).scalar()
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    admin.dispose()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return url.render_as_string(hide_password=False)


def app_on(url: str, instance: Path):
    """An app on the database at `url` (no Redis needed for what these tests run)."""
    return create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": url,
            "INSTANCE_PATH": str(instance),
            "REDIS_URL": "redis://127.0.0.1:1/0",
        }
    )


def run_cli(app, *args: str):
    """`flask --app app <args>` on `app`, in its own app context; the Click result."""
    with app.app_context():
        result = app.test_cli_runner().invoke(args=list(args))
        db.session.remove()
        db.engine.dispose()
    return result


def revisions() -> list[str]:
    """Every migration on disk, oldest first (the head last)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return [script.revision for script in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))]


class Ladder:
    """An empty database climbed one migration at a time, copied for each rehearsal, so
    the rehearsals together run each migration of the climb once, not once per test.

    SQLite copies the file; PostgreSQL makes the copy with CREATE DATABASE … TEMPLATE
    (neither database may have open connections then: every app here disposes its
    engine after use). Asked for a migration below where it stands, it starts over.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.url = fresh_database(tmp_path, "ops6_ladder")
        self.at: str | None = None

    def copy_at(self, revision: str, tmp_path: Path) -> str:
        """The URL of a new empty database at `revision`."""
        order = revisions()
        if self.at is not None and order.index(self.at) > order.index(revision):
            self.url, self.at = fresh_database(self.tmp_path, "ops6_ladder"), None
        if self.at != revision:
            climbed = run_cli(app_on(self.url, self.tmp_path), "db", "upgrade", revision)
            assert climbed.exit_code == 0, climbed.output
            self.at = revision
        if not DATABASE_URL:
            copy = tmp_path / "rehearsal.db"
            with closing(sqlite3.connect(make_url(self.url).database)) as source:  # the WAL's pages too
                with closing(sqlite3.connect(copy)) as target:
                    source.backup(target)
            return f"sqlite:///{copy}"
        base, copy = make_url(self.url), make_url(self.url).set(database=f"{make_url(self.url).database}_copy")
        admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{copy.database}"'))
            conn.execute(text(f'CREATE DATABASE "{copy.database}" TEMPLATE "{base.database}"'))
        admin.dispose()
        return copy.render_as_string(hide_password=False)
