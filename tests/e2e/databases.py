"""Fresh databases beside the test database, for upgrade and restore rehearsals (OPS-6).

SQLite: a new file. PostgreSQL: a database of its own named after the test database
(``<name>_<suffix>``, so runs with different TEST_DATABASE_URLs never meet), emptied
by dropping its schema.
"""

from __future__ import annotations

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
