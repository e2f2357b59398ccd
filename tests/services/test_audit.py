"""The audit log: one event per state change in the same transaction (AUD-1),
append-only in the database and hash-chained (AUD-2)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DatabaseError

from app.domain.audit_chain import sign_checkpoint
from app.domain.digests import canonical_json
from app.extensions import db
from app.models import AuditEvent, Queue
from app.services.audit import verify_chain
from app.services.lifecycle.sweeps import run_sweeps
from app.services.uow import (
    GENESIS_HASH,
    Actor,
    AuditChainKeyMismatch,
    AuditKeyConflict,
    audit_hash_material,
    audit_row_hash,
    unit_of_work,
)

from ..builders import approve, decide_report
from ..conftest import BACKEND
from .test_appeals import applied_takedown, compensate


def test_every_change_is_audited_with_a_unique_key(app, world):
    """AUD-1: actor, target, canonical details, unique idempotency key."""
    proposal = decide_report(world)
    approve(world, proposal)
    events = db.session.scalars(select(AuditEvent).order_by(AuditEvent.seq)).all()
    assert len({e.idempotency_key for e in events}) == len(events)
    approved = next(e for e in events if e.action == "action.approved")
    assert (approved.actor_type, approved.actor_id, approved.target_type, approved.target_id) == (
        "operator",
        world.users["reviewer"],
        "action_proposal",
        proposal.id,
    )
    approval_id = approved.details["approval_id"]
    assert approved.details_json == (
        f'{{"approval_id":"{approval_id}","payload_digest":"{proposal.payload_digest}","policy":"default",'
        f'"reason":null,"votes":"One reviewer: 1 of 1 reviewer"}}'
    )  # the policy that released it and its votes in words (POL-1)


@pytest.mark.parametrize("statement", ["UPDATE audit_events SET action = 'forged'", "DELETE FROM audit_events"])
def test_database_refuses_update_and_delete(app, world, statement):
    """AUD-2: triggers on PostgreSQL and SQLite."""
    decide_report(world)
    with pytest.raises(DatabaseError) as caught:
        db.session.execute(text(statement))
        db.session.commit()
    db.session.rollback()
    assert "append-only" in str(caught.value)
    assert db.session.scalar(select(AuditEvent.action).where(AuditEvent.action == "forged")) is None


def test_chain_links_every_row_and_verifies(app, world):
    """AUD-2: seq 1..n, each prev_hash is the previous row's hash."""
    proposal = decide_report(world)
    approve(world, proposal)
    events = db.session.scalars(
        select(AuditEvent).where(AuditEvent.installation_id == world.installation_id).order_by(AuditEvent.seq)
    ).all()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.row_hash for a, b in zip(events, events[1:], strict=False))
    report = verify_chain(world.installation_id)
    assert report.ok and report.rows_checked == len(events)


def tamper(seq: int, installation_id: str) -> None:
    """Edit a row behind the triggers' back, as an attacker with database access could."""
    dialect = db.session.get_bind().dialect.name
    if dialect == "postgresql":
        db.session.execute(text("SET LOCAL session_replication_role = replica"))
    else:
        db.session.execute(text("DROP TRIGGER audit_events_no_update"))
    db.session.execute(
        text("UPDATE audit_events SET details_json = :forged WHERE seq = :seq AND installation_id = :i"),
        {"forged": '{"forged":true}', "seq": seq, "i": installation_id},
    )
    if dialect == "sqlite":
        db.session.execute(
            text(
                "CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events "
                "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END"
            )
        )
    db.session.commit()


def test_verification_reports_the_first_broken_row(app, world):
    """AUD-2: a command can find where the chain was broken."""
    proposal = decide_report(world)
    approve(world, proposal)
    tamper(3, world.installation_id)
    report = verify_chain(world.installation_id)
    assert (report.ok, report.first_broken_seq, report.reason) == (False, 3, "row contents changed")
    result = app.test_cli_runner().invoke(args=["verify-audit"])
    assert result.exit_code == 1 and "BROKEN at seq 3" in result.output


# -- REC: a record that cannot be cut or rewritten unnoticed -----------------------------


def _dialect() -> str:
    return db.session.get_bind().dialect.name


def behind_triggers(statement: str, params: dict | None = None) -> None:
    """Run a statement with the append-only triggers out of the way, as someone with
    full control of the database (the owner role, a superuser, the SQLite file) could."""
    if _dialect() == "postgresql":
        db.session.execute(text("SET LOCAL session_replication_role = replica"))
        db.session.execute(text(statement), params or {})
    else:
        triggers = db.session.execute(
            text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_events'")
        ).all()
        for name, _ in triggers:
            db.session.execute(text(f'DROP TRIGGER "{name}"'))
        db.session.execute(text(statement), params or {})
        for _, sql in triggers:
            db.session.execute(text(sql))
    db.session.commit()


def audit_rows(installation_id: str) -> list[AuditEvent]:
    db.session.rollback()
    return db.session.scalars(
        select(AuditEvent).where(AuditEvent.installation_id == installation_id).order_by(AuditEvent.seq)
    ).all()


def unkeyed_hash(prev_hash: str, material: dict) -> str:
    """The first version's row hash: plain SHA-256, which anyone can recompute."""
    return "sha256:" + hashlib.sha256((prev_hash + "\n" + canonical_json(material)).encode()).hexdigest()


def rechain_from(installation_id: str, seq: int, row_hash, details: dict | None = None, until: int | None = None):
    """Edit row `seq` (optional) and recompute its hash and the later rows' links (up to `until`)."""
    rows = audit_rows(installation_id)
    prev = rows[seq - 2].row_hash if seq > 1 else GENESIS_HASH
    for row in rows[seq - 1 : until]:
        details_json = canonical_json(details) if details is not None and row.seq == seq else row.details_json
        new_hash = row_hash(prev, audit_hash_material(row, row.seq, details_json))
        behind_triggers(
            "UPDATE audit_events SET details_json = :d, prev_hash = :p, row_hash = :h WHERE id = :id",
            {"d": details_json, "p": prev, "h": new_hash, "id": row.id},
        )
        prev = new_hash


def verify_cli(app, *args: str):
    db.session.rollback()
    return app.test_cli_runner().invoke(args=["verify-audit", *args])


def story(world) -> None:
    proposal = decide_report(world)
    approve(world, proposal)


def _forgeries() -> list:
    """Every way a statement can rewrite or remove an audit row on this backend."""
    same = (
        "SELECT id, installation_id, seq, idempotency_key, 'forged', actor_type, actor_id, target_type, "
        "target_id, details_json, prev_hash, row_hash, created_at FROM audit_events WHERE seq = 1"
    )
    columns = (
        "(id, installation_id, seq, idempotency_key, action, actor_type, actor_id, target_type, target_id, "
        "details_json, prev_hash, row_hash, created_at)"
    )
    if BACKEND == "postgresql":
        return [
            pytest.param("TRUNCATE audit_events", id="truncate"),
            pytest.param("TRUNCATE audit_events CASCADE", id="truncate-cascade"),
            pytest.param(
                f"INSERT INTO audit_events {columns} {same} ON CONFLICT (id) DO UPDATE SET action = 'forged'",
                id="upsert",
            ),
        ]
    new_id = same.replace("SELECT id,", "SELECT 'aud_forged',")
    return [
        pytest.param(f"REPLACE INTO audit_events {columns} {same}", id="replace"),
        pytest.param(f"INSERT OR REPLACE INTO audit_events {columns} {same}", id="insert-or-replace"),
        pytest.param(f"INSERT OR REPLACE INTO audit_events {columns} {new_id}", id="replace-by-key-and-seq"),
        pytest.param(
            f"INSERT INTO audit_events {columns} {same} ON CONFLICT (id) DO UPDATE SET action = 'forged'", id="upsert"
        ),
        pytest.param(
            f"PRAGMA recursive_triggers = ON; REPLACE INTO audit_events {columns} {same}",
            id="replace-recursive-triggers",
        ),
    ]


@pytest.mark.parametrize("statement", _forgeries())
def test_database_refuses_truncate_and_replace(app, world, statement):
    """REC-1: TRUNCATE (PostgreSQL statement trigger) and REPLACE / INSERT OR REPLACE /
    upsert (SQLite BEFORE INSERT trigger, whatever recursive_triggers says) are refused."""
    story(world)
    before = [(r.id, r.action, r.row_hash) for r in audit_rows(world.installation_id)]
    with pytest.raises(DatabaseError) as caught:
        for part in statement.split("; "):
            db.session.execute(text(part))
        db.session.commit()
    db.session.rollback()
    assert "append-only" in str(caught.value)
    assert [(r.id, r.action, r.row_hash) for r in audit_rows(world.installation_id)] == before
    assert verify_chain(world.installation_id).ok


def test_chain_hashes_are_hmacs_under_the_chain_key(app, world):
    """REC-3: each row's hash is HMAC-SHA256 under AUDIT_CHAIN_KEY over the previous hash and the row."""
    story(world)
    key = app.config["AUDIT_CHAIN_KEY"].encode()
    for row in audit_rows(world.installation_id):
        material = canonical_json(audit_hash_material(row, row.seq, row.details_json))
        mac = hmac.new(key, (row.prev_hash + "\n" + material).encode(), hashlib.sha256).hexdigest()
        assert row.row_hash.startswith("hmac-sha256:") and row.row_hash.endswith(":" + mac)
    assert app.config["AUDIT_CHAIN_KEY"] not in canonical_json([r.details for r in audit_rows(world.installation_id)])


@pytest.mark.parametrize("hasher", ["unkeyed", "wrong key"])
def test_an_edit_rechained_without_the_key_is_caught(app, world, hasher):
    """REC-3: editing a row and recomputing every later hash, without the key, fails verify-audit."""
    story(world)
    if hasher == "unkeyed":
        row_hash = unkeyed_hash
    else:
        key_id = audit_rows(world.installation_id)[0].row_hash.split(":")[1]

        def row_hash(prev, material):
            mac = hmac.new(b"guessed", (prev + "\n" + canonical_json(material)).encode(), hashlib.sha256)
            return f"hmac-sha256:{key_id}:{mac.hexdigest()}"

    rechain_from(world.installation_id, 3, row_hash, details={"forged": True})
    result = verify_cli(app)
    assert result.exit_code == 1, result.output
    assert "BROKEN at seq 3" in result.output


def test_checkpoint_then_cut_tail_is_reported(app, world):
    """REC-4: deleting the last rows passes the chain check, but not the checkpoints."""
    story(world)
    result = app.test_cli_runner().invoke(args=["audit-checkpoint"])
    assert result.exit_code == 0, result.output
    rows = audit_rows(world.installation_id)
    behind_triggers(
        "DELETE FROM audit_events WHERE seq > :s AND installation_id = :i",
        {"s": len(rows) - 2, "i": world.installation_id},
    )
    assert verify_chain(world.installation_id).ok  # what a chain alone can tell
    result = verify_cli(app)
    assert result.exit_code == 1, result.output
    assert "cut tail" in result.output
    assert f"seq {len(rows)}" in result.output


def test_truncate_after_a_checkpoint_is_reported(app, world):
    """REC-4: an emptied table no longer verifies as "ok (0 rows)"."""
    story(world)
    assert app.test_cli_runner().invoke(args=["audit-checkpoint"]).exit_code == 0
    behind_triggers("DELETE FROM audit_events")
    result = verify_cli(app)
    assert result.exit_code == 1 and "cut tail" in result.output, result.output


def test_an_edit_rechained_with_the_key_is_caught_by_checkpoints(app, world):
    """REC-4: even with the key, rewriting a row before a checkpoint is reported."""
    story(world)
    assert app.test_cli_runner().invoke(args=["audit-checkpoint"]).exit_code == 0
    key = app.config["AUDIT_CHAIN_KEY"].encode()
    rechain_from(world.installation_id, 2, lambda prev, m: audit_row_hash(prev, m, key), details={"forged": True})
    assert verify_chain(world.installation_id).ok  # the key holder's forgery links
    result = verify_cli(app)
    assert result.exit_code == 1, result.output
    assert "rewritten" in result.output


def test_two_compensations_with_one_key_are_both_audited(app, world, platform):
    """REC-5: the compensation's audit key names its proposal; none is skipped."""
    first_original = applied_takedown(world, 0)
    second_original = applied_takedown(world, 1)
    first = compensate(world, first_original, key="same-key")
    second = compensate(world, second_original, key="same-key")
    assert first.proposal_id != second.proposal_id
    for proposal_id in (first.proposal_id, second.proposal_id):
        actions = db.session.scalars(select(AuditEvent.action).where(AuditEvent.target_id == proposal_id)).all()
        assert "workflow.compensation_proposed" in actions


def _audit_in_a_uow(installation_id: str, key: str, details: dict) -> None:
    with unit_of_work() as uow:
        uow.audit(installation_id, key, "test.event", Actor.system("test"), "installation", installation_id, details)
        uow.commit()


def test_a_duplicate_audit_key_with_other_content_fails_the_transaction(app, world):
    """REC-5: a skipped duplicate must be identical; otherwise the whole unit of work fails."""
    _audit_in_a_uow(world.installation_id, "test:dup", {"n": 1})
    _audit_in_a_uow(world.installation_id, "test:dup", {"n": 1})  # identical: written once
    count = len(audit_rows(world.installation_id))
    with pytest.raises(AuditKeyConflict) as caught, unit_of_work() as uow:
        uow.session.add(Queue(installation_id=world.installation_id, name="Other", slug="other"))
        uow.audit(world.installation_id, "test:fresh", "test.event", Actor.system("test"), "installation", "x", {})
        uow.audit(
            world.installation_id,
            "test:dup",
            "test.event",
            Actor.system("test"),
            "installation",
            world.installation_id,
            {"n": 2},
        )
        uow.commit()
    assert "test:dup" in str(caught.value)
    assert len(audit_rows(world.installation_id)) == count
    assert db.session.scalar(select(Queue).where(Queue.slug == "other")) is None
    with pytest.raises(AuditKeyConflict), unit_of_work() as uow:  # two in one unit of work
        uow.audit(world.installation_id, "test:twice", "test.event", Actor.system("a"), "installation", "x", {})
        uow.audit(world.installation_id, "test:twice", "test.event", Actor.system("b"), "installation", "x", {})
        uow.commit()


def test_the_embedded_default_generates_the_chain_key_into_the_instance_folder(tmp_path, monkeypatch):
    """REC-3: without AUDIT_CHAIN_KEY a key is generated once into instance/ (0600) and kept."""
    from app.config import Config

    monkeypatch.delenv("AUDIT_CHAIN_KEY", raising=False)
    first, second = Config(str(tmp_path)), Config(str(tmp_path))
    path = tmp_path / "audit_chain_key"
    assert first.AUDIT_CHAIN_KEY == second.AUDIT_CHAIN_KEY == path.read_text().strip()
    assert len(first.AUDIT_CHAIN_KEY) >= 32 and path.stat().st_mode & 0o777 == 0o600
    assert first.AUDIT_CHAIN_KEY != first.SECRET_KEY
    monkeypatch.setenv("AUDIT_CHAIN_KEY", "from-the-environment-" + "e" * 20)
    assert Config(str(tmp_path / "other")).AUDIT_CHAIN_KEY == "from-the-environment-" + "e" * 20
    assert not (tmp_path / "other" / "audit_chain_key").exists()
    monkeypatch.setenv("AUDIT_CHAIN_KEY", "short")
    with pytest.raises(ValueError, match="at least 32 characters"):
        Config(str(tmp_path))


def test_a_process_with_another_key_refuses_to_append(app, world):
    """REC-3: appending under another key would fork the chain; the unit of work fails instead."""
    story(world)
    count = len(audit_rows(world.installation_id))
    app.config["AUDIT_CHAIN_KEY"] = "another-key-" + "z" * 32
    with pytest.raises(AuditChainKeyMismatch, match="every web and worker process must share"):
        _audit_in_a_uow(world.installation_id, "test:other-key", {})
    assert len(audit_rows(world.installation_id)) == count
    result = verify_cli(app)
    assert result.exit_code == 1 and "AUDIT_CHAIN_KEY has key id" in result.output, result.output


def make_unkeyed(installation_id: str) -> None:
    """Turn a chain into what the first version wrote: plain SHA-256 hashes."""
    rechain_from(installation_id, 1, unkeyed_hash)


def test_an_unkeyed_chain_is_sealed_by_audit_rekey(app, world):
    """REC-3: rows from before the key are verified and sealed by an audit.rechained row."""
    story(world)
    make_unkeyed(world.installation_id)
    legacy = len(audit_rows(world.installation_id))
    result = verify_cli(app)
    assert result.exit_code == 1 and "NOT KEYED" in result.output and "audit-rekey" in result.output
    result = app.test_cli_runner().invoke(args=["audit-rekey"])
    assert result.exit_code == 0 and f"{legacy} unkeyed rows verified and sealed" in result.output, result.output
    rows = audit_rows(world.installation_id)
    anchor = rows[legacy]
    assert (anchor.action, anchor.prev_hash, anchor.details) == (
        "audit.rechained",
        rows[legacy - 1].row_hash,
        {"previous_rows": legacy, "previous_head": rows[legacy - 1].row_hash, "verified": True},
    )
    assert anchor.row_hash.startswith("hmac-sha256:")
    approve(world, decide_report(world, 1))  # new rows are keyed
    assert all(r.row_hash.startswith("hmac-sha256:") for r in audit_rows(world.installation_id)[legacy:])
    result = verify_cli(app)
    assert result.exit_code == 0 and f"{legacy} unkeyed rows sealed" in result.output, result.output
    assert "keyed already" in app.test_cli_runner().invoke(args=["audit-rekey"]).output
    rechain_from(world.installation_id, 2, unkeyed_hash, details={"forged": True}, until=legacy)  # an old row
    result = verify_cli(app)
    assert result.exit_code == 1 and f"BROKEN at seq {legacy + 1}" in result.output, result.output


def test_the_first_keyed_write_seals_an_unkeyed_chain_itself(app, world):
    """REC-3: without audit-rekey, the first write after the upgrade appends audit.rechained (unverified)."""
    story(world)
    make_unkeyed(world.installation_id)
    legacy = len(audit_rows(world.installation_id))
    approve(world, decide_report(world, 1))
    anchor = audit_rows(world.installation_id)[legacy]
    assert (anchor.action, anchor.details["verified"]) == ("audit.rechained", False)
    assert verify_chain(world.installation_id).ok


def test_audit_rekey_refuses_a_broken_unkeyed_chain(app, world):
    """REC-3: a chain that does not verify is not sealed."""
    story(world)
    make_unkeyed(world.installation_id)
    behind_triggers("UPDATE audit_events SET details_json = '{}' WHERE seq = 2")
    result = app.test_cli_runner().invoke(args=["audit-rekey"])
    assert result.exit_code == 1 and "REFUSED" in result.output and "broken at seq 2" in result.output
    assert "audit.rechained" not in [r.action for r in audit_rows(world.installation_id)]


def test_keyed_rows_after_unkeyed_ones_need_the_anchor(app, world):
    """REC-3: rewriting the first rows unkeyed, keeping later keyed rows, is caught."""
    story(world)
    rows = audit_rows(world.installation_id)
    rechain_from(world.installation_id, 1, unkeyed_hash)
    key = app.config["AUDIT_CHAIN_KEY"].encode()
    rechain_from(world.installation_id, 4, lambda prev, m: audit_row_hash(prev, m, key))  # even with the key
    report = verify_chain(world.installation_id)
    assert (report.first_broken_seq, report.reason) == (
        4,
        "keyed rows follow unkeyed ones without an audit.rechained row",
    )
    assert len(rows) > 4


def checkpoint_lines(app) -> list[dict]:
    path = Path(app.config["INSTANCE_PATH"]) / "audit-checkpoints.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_checkpoints_are_signed_lines_in_the_file_and_the_log(app, world, caplog):
    """REC-4: flask audit-checkpoint appends a signed head per installation and logs it."""
    story(world)
    with caplog.at_level(logging.INFO, logger="app.services.audit"):
        result = app.test_cli_runner().invoke(args=["audit-checkpoint"])
    assert result.exit_code == 0, result.output
    rows = audit_rows(world.installation_id)
    [line] = checkpoint_lines(app)
    assert {k: line[k] for k in ("installation_id", "seq", "head_hash", "rows")} == {
        "installation_id": world.installation_id,
        "seq": rows[-1].seq,
        "head_hash": rows[-1].row_hash,
        "rows": len(rows),
    }
    assert line["signature"].startswith("hmac-sha256:") and line["at"].endswith("Z")
    [logged] = [r for r in caplog.records if hasattr(r, "audit_checkpoint")]
    assert logged.audit_checkpoint == line
    result = verify_cli(app)
    assert result.exit_code == 0 and "1 checkpoints agree" in result.output, result.output


def test_the_sweep_writes_a_checkpoint_when_the_head_moved(app, world):
    """REC-4: the sweep checkpoints each moved head, at most once per interval."""
    story(world)
    assert run_sweeps().audit_checkpoints_written == 1
    assert run_sweeps().audit_checkpoints_written == 0  # within the interval
    app.config["AUDIT_CHECKPOINT_INTERVAL_SECONDS"] = 0
    assert run_sweeps().audit_checkpoints_written == 0  # head unchanged
    approve(world, decide_report(world, 1))
    assert run_sweeps().audit_checkpoints_written == 1
    assert [line["seq"] for line in checkpoint_lines(app)] == sorted({line["seq"] for line in checkpoint_lines(app)})
    assert checkpoint_lines(app)[-1]["seq"] == audit_rows(world.installation_id)[-1].seq


def test_the_sweep_logs_a_head_that_went_backwards(app, world, caplog):
    """REC-4: rows cut after the sweep's last checkpoint raise an error in the log at once."""
    story(world)
    app.config["AUDIT_CHECKPOINT_INTERVAL_SECONDS"] = 0
    run_sweeps()
    rows = audit_rows(world.installation_id)
    behind_triggers("DELETE FROM audit_events WHERE seq >= :s", {"s": len(rows) - 1})
    with caplog.at_level(logging.ERROR, logger="app.services.audit"):
        run_sweeps()
    assert any("cut or rewritten" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("forgery", ["altered", "other key", "not json"])
def test_a_forged_checkpoint_line_is_reported(app, world, forgery):
    """REC-4: a checkpoint line that is not validly signed fails verification."""
    story(world)
    app.test_cli_runner().invoke(args=["audit-checkpoint"])
    path = Path(app.config["INSTANCE_PATH"]) / "audit-checkpoints.jsonl"
    [line] = checkpoint_lines(app)
    if forgery == "altered":
        text_line = json.dumps({**line, "rows": line["rows"] + 5, "seq": line["seq"] + 5})
    elif forgery == "other key":
        text_line = json.dumps(sign_checkpoint(world.installation_id, 99, "x", 99, line["at"], b"k" * 32))
    else:
        text_line = "{not json"
    with open(path, "a") as handle:
        handle.write(text_line + "\n")
    result = verify_cli(app)
    assert result.exit_code == 1 and "checkpoint INVALID" in result.output and ":2:" in result.output, result.output


def test_checkpoints_from_a_log_export_are_read(app, world, tmp_path):
    """REC-4: verify-audit --checkpoints takes log lines carrying audit_checkpoint."""
    story(world)
    app.test_cli_runner().invoke(args=["audit-checkpoint"])
    [line] = checkpoint_lines(app)
    export = tmp_path / "export.jsonl"
    export.write_text(json.dumps({"level": "INFO", "message": "audit checkpoint", "audit_checkpoint": line}) + "\n")
    behind_triggers("DELETE FROM audit_events WHERE seq = :s", {"s": line["seq"]})
    result = verify_cli(app, "--checkpoints", str(export))
    assert result.exit_code == 1 and "cut tail" in result.output, result.output


def test_two_attempts_with_the_same_receipt_each_get_an_audit_row(app, world, scripted):
    """REC-5: a synchronous receipt's key names its attempt, so a platform answering the
    same retryable failure twice neither loses the second change's audit row nor fails it."""
    from app.services.lifecycle.dispatch import deliver

    from .. import scripted as s
    from ..builders import make_due

    busy = s.receipt("failed", terminal=False, retry_after_seconds=60, error_code="busy")
    scripted(busy, busy)
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "failed"
    make_due(proposal)
    assert deliver(proposal.id).state == "failed"
    received = db.session.scalars(
        select(AuditEvent).where(
            AuditEvent.target_id == proposal.id, AuditEvent.action == "workflow.action_result_received"
        )
    ).all()
    assert len(received) == 2
    assert len({e.details["connection_attempt_id"] for e in received}) == 2
