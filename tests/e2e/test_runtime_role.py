"""The console run as PostgreSQL's least-privileged runtime role (SPEC REC-2).

The role gets exactly the grants the production guide (docs/operations.md) gives (the
SQL is read from that page, so the guide and this test cannot drift apart). A story runs through
the app as that role; then every way of changing or removing audit rows, or of
getting the triggers out of the way, is refused by PostgreSQL's privileges.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, make_url, select, text
from sqlalchemy.exc import DBAPIError

from app import create_app
from app.extensions import db
from app.jobs import bind_app
from app.models import AuditEvent
from app.services.audit import read_checkpoints, verify_chain, write_checkpoints
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.sweeps import run_sweeps

from ..builders import approve, decide_report, login, make_world, reload
from ..conftest import BACKEND, FreshSessionClient

pytestmark = pytest.mark.skipif(BACKEND != "postgresql", reason="REC-2 is about PostgreSQL roles")

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def readme_grants(role: str) -> list[str]:
    """The statements of the guide's runtime-role block, for `role` instead of console_app."""
    match = re.search(r"```sql\n(-- REC-2: the runtime role's grants.*?)```", OPERATIONS.read_text(), re.S)
    assert match, "docs/operations.md has no runtime-role SQL block"
    body = "\n".join(line for line in match.group(1).splitlines() if not line.lstrip().startswith("--"))
    return [s.strip().replace("console_app", role) for s in body.split(";") if s.strip()]


@pytest.fixture
def runtime_url(database_url):
    owner = create_engine(database_url)
    role = f"{make_url(database_url).database}_runtime"
    with owner.begin() as conn:
        if not conn.scalar(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}):
            conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        for statement in readme_grants(role):
            conn.execute(text(statement))
    yield make_url(database_url).set(username=role).render_as_string(hide_password=False), role
    with owner.begin() as conn:
        conn.execute(text(f'DROP OWNED BY "{role}"'))
        conn.execute(text(f'DROP ROLE "{role}"'))
    owner.dispose()


@pytest.fixture
def runtime_app(runtime_url, redis_url, tmp_path):
    url, _ = runtime_url
    app = create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": url,
            "REDIS_URL": redis_url,
            "EGRESS_ALLOW_PRIVATE": True,
            "PASSWORD_HASH_METHOD": "pbkdf2:sha256:1000",
            "SERVER_NAME": None,
            "INSTANCE_PATH": str(tmp_path),
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


REFUSED = {
    "TRUNCATE audit_events": "permission denied",
    "UPDATE audit_events SET action = 'forged'": "permission denied",
    "DELETE FROM audit_events": "permission denied",
    "INSERT INTO audit_events SELECT * FROM audit_events WHERE seq = 1 "
    "ON CONFLICT (id) DO UPDATE SET action = 'forged'": "permission denied",
    "ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete": "must be owner",
    "ALTER TABLE audit_events DISABLE TRIGGER ALL": "must be owner",
    "DROP TRIGGER audit_events_no_truncate ON audit_events": "must be owner",
    "DROP TABLE audit_events": "must be owner",
    "SET session_replication_role = replica": "permission denied",
    "CREATE TABLE shadow_audit (id text)": "permission denied",
}


def test_the_console_runs_as_the_runtime_role_and_cannot_touch_audit_rows(runtime_app, runtime_url, platform):
    """REC-2: a role that owns nothing runs a story (audit INSERTs work); TRUNCATE,
    ALTER TABLE ... DISABLE TRIGGER, DROP TRIGGER, UPDATE and DELETE on audit_events are refused."""
    url, role = runtime_url
    world = make_world(platform.url)
    platform.configure_for(world)
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    assert reload(proposal).state == "applied"
    run_sweeps()  # the sweep, checkpoints included, runs as this role too
    write_checkpoints()
    client = runtime_app.test_client()
    login(client, "reviewer@example.com")
    assert client.get(f"/proposals/{proposal.id}").status_code == 200

    db.session.rollback()
    before = db.session.execute(select(AuditEvent.id, AuditEvent.row_hash).order_by(AuditEvent.seq)).all()
    assert len(before) > 10
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            owned = conn.scalar(
                text(
                    "SELECT count(*) FROM pg_class JOIN pg_roles ON pg_roles.oid = relowner "
                    "WHERE rolname = current_user"
                )
            )
            privileges = conn.scalars(
                text(
                    "SELECT privilege_type FROM information_schema.table_privileges "
                    "WHERE grantee = current_user AND table_name = 'audit_events'"
                )
            ).all()
        assert owned == 0
        assert sorted(privileges) == ["INSERT", "SELECT"]
        for statement, message in REFUSED.items():
            with engine.connect() as conn, pytest.raises(DBAPIError) as caught:
                conn.execute(text(statement))
                conn.commit()
            assert message in str(caught.value.orig), (statement, caught.value.orig)
            assert "append-only" not in str(caught.value.orig), f"{statement}: refused by a trigger, not by privileges"
    finally:
        engine.dispose()
    db.session.rollback()
    assert db.session.execute(select(AuditEvent.id, AuditEvent.row_hash).order_by(AuditEvent.seq)).all() == before
    checkpoints = read_checkpoints([Path(runtime_app.config["INSTANCE_PATH"]) / "audit-checkpoints.jsonl"])
    report = verify_chain(world.installation_id, checkpoints.by_installation[world.installation_id])
    assert report.ok and report.checkpoints_checked >= 2, report
