"""A bulk batch end to end on the ordinary engine (SPEC BULK-2, BULK-3, BULK-6)."""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionProposal, BulkBatch
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.progress import ledger
from app.services.bulk.submission import submit_batch
from tests.builders import make_operator, run_worker


def _start(team, lines, reason="spam network"):
    moderator = make_operator(team.installation_id, "moderator")
    action = bulk_actions(db.session, team.installation_id)[0]
    return start_dry_run(
        moderator,
        selection={"source": "list", "text": "\n".join(lines)},
        action_key=action.key,
        decision_code=action.decision_code,
        reason=reason,
    )


def test_bulk_3_one_approval_applies_every_item_once(app, team):
    lines = [f"post:{n}" for n in range(25)]
    batch_id = _start(team, lines)
    batch = db.session.get(BulkBatch, batch_id)
    assert batch.counts["would_act"] == 25 and batch.state == "dry_run"
    digest = submit_batch(make_operator(team.installation_id, "moderator"), batch_id, batch.dry_run_digest)
    assert db.session.scalar(select(func.count()).select_from(ActionProposal).where(
        ActionProposal.bulk_batch_id == batch_id)) == 25
    result = approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    assert result == {"approved": 25, "skipped": 0}
    run_worker(app)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    batch = db.session.get(BulkBatch, batch_id)
    book = ledger(db.session, batch)
    assert book.adds_up and book["applied"] == 25, book
    assert batch.state == "completed"
    assert len(team.demo_platform.state.effects) == 25
