"""The audit log: one event per state change in the same transaction (AUD-1),
append-only in the database and hash-chained (AUD-2)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DatabaseError

from app.extensions import db
from app.models import AuditEvent
from app.services.audit import verify_chain
from app.services.uow import GENESIS_HASH

from ..builders import approve, decide_report


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
        f'{{"approval_id":"{approval_id}","payload_digest":"{proposal.payload_digest}","reason":null}}'
    )


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
