"""Platform secrets encrypted at rest (SPEC OPS-3): the raw columns hold no secret,
delivery still authenticates and signs, migration 0018 seals what was plain, a key
rotation re-seals everything, and a value under a missing key fails clearly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from flask_migrate import downgrade, upgrade
from sqlalchemy import inspect, select, text
from standardwebhooks import Webhook

from app import create_app
from app.extensions import db
from app.models import AuditEvent, ConfigChange, ConnectionVersion
from app.secret_box import SecretBox, UnreadableSecret, decode_key, is_sealed, new_key_text, sealed_key_id
from app.services.lifecycle.dispatch import deliver

from .. import scripted as s
from ..builders import approve, approve_in_console, approve_pending, decide_report, pending_changes, reload
from ..conftest import ROOT
from ..web.test_admin import admin, assert_refused, text as page_text
from ..web.test_admin_connections import create, shown_secret, versions_of, connection_by_slug

TOKEN = "acme-bearer-secret-1"
SEALED = (
    ("connection_versions", "bearer_token"),
    ("connection_versions", "signing_secret"),
    ("config_changes", "secrets_json"),
)
SEALED_SINCE_0019 = SEALED + (("operator_users", "totp_secret"),)  # the operators' seeds (OPS-2)


def sealed_count() -> int:
    """How many sealed values the database holds (the world's two connection secrets
    and its enrolled operators' TOTP seeds)."""
    return sum(len(raw_values(t, c)) for t, c in SEALED_SINCE_0019)


def raw_rows() -> dict[str, list[tuple]]:
    """Every row of every table, read with plain SQL (no column type opens anything)."""
    db.session.rollback()
    rows = {}
    for table in inspect(db.engine).get_table_names():
        rows[table] = [tuple(r) for r in db.session.execute(text(f'SELECT * FROM "{table}"')).all()]
    db.session.rollback()
    return rows


def places_holding(secrets: list[str]) -> list[str]:
    """Where (table) any of `secrets` appears in any column of any row."""
    return [
        f"{table}: {secret[:6]}…"
        for table, rows in raw_rows().items()
        for row in rows
        for value in row
        for secret in secrets
        if value is not None and secret in str(value)
    ]


def raw_values(table: str, column: str) -> list[str]:
    db.session.rollback()
    values = db.session.scalars(text(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")).all()
    db.session.rollback()
    return values


def other_app(app, **keys):
    """Another app on the same database and instance, with other keys (a restarted process)."""
    return create_app(
        {
            "TESTING": True,
            "CONFIGURE_LOGGING": False,
            "SQLALCHEMY_DATABASE_URI": app.config["SQLALCHEMY_DATABASE_URI"],
            "REDIS_URL": app.config["REDIS_URL"],
            "INSTANCE_PATH": app.config["INSTANCE_PATH"],
            "SECRETS_KEY_PREVIOUS": "",
            **keys,
        }
    )


def run_in(other, args: list[str]):
    """Run a CLI command in `other` (its own app context and session); the result."""
    db.session.rollback()
    with other.app_context():
        result = other.test_cli_runner().invoke(args=args)
        db.session.remove()
        db.engine.dispose()
    return result


def test_ops3_raw_columns_hold_no_secret(app, client, world):
    """OPS-3: a connection created in the console with a bearer token and a generated
    signing secret: neither is in any column of any table, while it waits for the
    second admin (the change's secrets) nor once applied; the model opens them."""
    csrf = admin(client)
    response = create(client, csrf, signing_secret_action="generate", integration_id=world.integration_id)
    signing = shown_secret(page_text(response))
    secrets = [TOKEN, signing, world.platform_token, world.signing_secret]
    assert pending_changes() and places_holding(secrets) == []
    [secrets_json] = raw_values("config_changes", "secrets_json")
    assert is_sealed(secrets_json)
    approve_pending(app)
    assert places_holding(secrets) == []
    for table, column in SEALED[:2]:
        assert raw_values(table, column) and all(is_sealed(v) for v in raw_values(table, column))
    [version] = versions_of(connection_by_slug("acme-api").id)
    assert (version.bearer_token, version.signing_secret) == (TOKEN, signing)


@pytest.fixture
def approved(app, world):
    proposal = decide_report(world)
    approve(world, proposal)
    return reload(proposal)


def test_ops3_delivery_authenticates_and_signs_with_sealed_secrets(app, world, approved, scripted):
    """OPS-3: the worker opens the sealed token and signing secret: the request carries
    the bearer token and a Standard Webhooks signature that verifies."""
    assert all(is_sealed(v) for v in raw_values("connection_versions", "bearer_token"))
    script = scripted(s.applied())
    assert deliver(approved.id).state == "applied"
    headers, body = script.requests[0]
    assert headers["Authorization"] == f"Bearer {world.platform_token}"
    raw = json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    Webhook(world.signing_secret).verify(raw, headers)


def seal_under_missing_key(version_id: str) -> None:
    """Seal a version's token under a key no process has (as after dropping a key too early)."""
    lost = SecretBox(decode_key(new_key_text()))
    sealed = lost.seal("lost-token", context="connection_versions.bearer_token")
    db.session.execute(text("UPDATE connection_versions SET bearer_token = :v WHERE id = :id"), {"v": sealed, "id": version_id})
    db.session.commit()


def test_ops3_a_secret_under_a_missing_key_fails_the_attempt_clearly(app, client, world, approved, scripted, runner):
    """OPS-3: a token sealed under a key not configured: the delivery attempt fails with
    ``action_connection_secret_unreadable`` (retryable, nothing sent); the connection
    page still renders and says so; secrets-status and rotate-secrets-key exit 1."""
    script = scripted(s.applied())
    seal_under_missing_key(world.connection_version_id)
    db.session.rollback()
    assert isinstance(db.session.get(ConnectionVersion, world.connection_version_id).bearer_token, UnreadableSecret)
    outcome = deliver(approved.id)
    assert (outcome.error_code, outcome.terminal) == ("action_connection_secret_unreadable", False)
    assert script.requests == []
    admin(client)
    connection_id = db.session.get(ConnectionVersion, world.connection_version_id).connection_id
    page = client.get(f"/admin/connections/{connection_id}")
    assert page.status_code == 200 and "unreadable: its key is not configured" in page_text(page)
    status = runner.invoke(args=["secrets-status"])
    assert status.exit_code == 1 and "NOT CONFIGURED" in status.output
    rotation = runner.invoke(args=["rotate-secrets-key"])
    assert rotation.exit_code == 1 and "secrets_unreadable" in rotation.output


def test_ops3_a_change_whose_secrets_are_unreadable_is_refused_unchanged(app, client, world):
    """OPS-3: a pending change's secrets sealed under a key not configured: the second
    admin's approval is refused with ``config_change_secrets_unreadable`` (409), the
    change stays pending and no connection is made; its page still renders."""
    csrf = admin(client)
    create(client, csrf)
    [change] = pending_changes()
    lost = SecretBox(decode_key(new_key_text())).seal('{"bearer_token":"x"}', context="config_changes.secrets_json")
    db.session.execute(text("UPDATE config_changes SET secrets_json = :v WHERE id = :id"), {"v": lost, "id": change.id})
    db.session.commit()
    assert client.get(f"/admin/changes/{change.id}").status_code == 200
    assert_refused(approve_in_console(app, change.id), 409, "config_change_secrets_unreadable")
    assert [c.id for c in pending_changes()] == [change.id] and connection_by_slug("acme-api") is None


def test_ops3_rotation_reseals_everything_under_the_new_key(app, world):
    """OPS-3: with SECRETS_KEY new and SECRETS_KEY_PREVIOUS the old key, the command
    re-seals every value in one transaction, prints counts, is audited (no secret),
    and a second run changes nothing; then the old key is dropped and everything opens."""
    old, new = app.config["SECRETS_KEY"], new_key_text()
    new_id = SecretBox(decode_key(new)).current_id
    rotating = other_app(app, SECRETS_KEY=new, SECRETS_KEY_PREVIOUS=old)
    n = sealed_count()
    assert n > 2  # connection secrets and operators' seeds
    assert run_in(rotating, ["secrets-status"]).exit_code == 0  # under a previous key: readable
    first = run_in(rotating, ["rotate-secrets-key"])
    assert first.exit_code == 0, first.output
    assert "connection_versions.bearer_token: 1 resealed" in first.output
    assert f"resealed {n}, sealed 0 plain, 0 under the current key already" in first.output
    again = run_in(rotating, ["rotate-secrets-key"])
    assert f"resealed 0, sealed 0 plain, {n} under the current key already" in again.output
    assert {sealed_key_id(v) for t, c in SEALED_SINCE_0019 for v in raw_values(t, c)} == {new_id}
    [event] = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "secrets.key_rotated")).all()
    details = json.loads(event.details_json)
    assert details["key_id"] == new_id and details["all_installations"] == {"resealed": n, "sealed_plain": 0}
    assert world.platform_token not in event.details_json and world.signing_secret not in event.details_json
    rotated = other_app(app, SECRETS_KEY=new)  # the old key dropped
    status = run_in(rotated, ["secrets-status"])
    assert status.exit_code == 0 and "under a key not configured: 0" in status.output
    with rotated.app_context():
        version = db.session.get(ConnectionVersion, world.connection_version_id)
        assert (version.bearer_token, version.signing_secret) == (world.platform_token, world.signing_secret)
        db.session.remove()
        db.engine.dispose()


def test_ops3_migration_0018_seals_plain_secrets(app, client, world):
    """OPS-3: a database at 0017 holding plain secrets (0018's downgrade opens them),
    upgraded to 0018, holds sealed values that open to the originals; a pending
    change's secrets too. On PostgreSQL the columns are widened as the models say."""
    csrf = admin(client)
    create(client, csrf)  # a pending change holding the token
    before = {(t, c): set(raw_values(t, c)) for t, c in SEALED}
    migrations = str(ROOT / "migrations")
    db.session.remove()
    downgrade(directory=migrations, revision="0017")
    plain = {(t, c): set(raw_values(t, c)) for t, c in SEALED}
    assert not any(is_sealed(v) for values in plain.values() for v in values)
    assert world.platform_token in plain[SEALED[0]] and any(TOKEN in v for v in plain[SEALED[2]])
    db.session.remove()
    upgrade(directory=migrations)
    after = {(t, c): set(raw_values(t, c)) for t, c in SEALED}
    assert all(is_sealed(v) for values in after.values() for v in values) and after != before
    box = app.extensions["secret_box"]
    for (table, column), values in after.items():
        assert {box.open(v, context=f"{table}.{column}") for v in values} == plain[(table, column)]
    [change] = pending_changes()
    assert isinstance(change, ConfigChange) and change.secrets == {"bearer_token": TOKEN}
    if db.engine.dialect.name == "postgresql":  # SQLite does not enforce a VARCHAR's length
        columns = {c["name"]: c["type"] for c in inspect(db.engine).get_columns("connection_versions")}
        assert columns["bearer_token"].length == columns["signing_secret"].length == 1000


def doc_script() -> str:
    """The ```bash blocks of docs/secrets.md, in order, as one script that stops at the
    first failing command."""
    doc = (ROOT / "docs" / "secrets.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", doc, re.M | re.S)
    assert len(blocks) == 5, blocks
    return "set -euo pipefail\n" + "".join(blocks)


def test_ops3_the_commands_in_docs_secrets_md_run(app, world):
    """OPS-3: every command of docs/secrets.md, read from the page and run in its order
    by bash in a real shell (the real `flask` on this test's database): generate a key,
    status, rotate to a new key with the old one previous, status, drop the old key,
    status. Restarting processes (said in words there) is nothing to do here: each
    `flask` command is a new process. Afterwards every value is under the new key."""
    old_id = app.extensions["secret_box"].current_id
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "INSTANCE_PATH": app.config["INSTANCE_PATH"],
        "SECRETS_KEY": app.config["SECRETS_KEY"],
    }
    env.pop("SECRETS_KEY_PREVIOUS", None)
    n = sealed_count()
    db.session.remove()
    done = subprocess.run(
        ["bash", "-c", doc_script()], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"resealed {n}, sealed 0 plain" in done.stdout
    assert "nothing is sealed under a previous key: SECRETS_KEY_PREVIOUS may be removed" in done.stdout
    assert done.stdout.rstrip().endswith("under a previous key: 0")
    key_ids = {sealed_key_id(v) for t, c in SEALED_SINCE_0019 for v in raw_values(t, c)}
    assert len(key_ids) == 1 and old_id not in key_ids
    assert db.session.scalar(select(AuditEvent.id).where(AuditEvent.action == "secrets.key_rotated"))
