"""Undo a batch: a compensation batch under four-eyes for what it applied, skipping
items changed since, each with its reason (SPEC BULK-8, COMP-3, FOUR-1)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from app.domain.bulk.batch import (
    UNDO_ALREADY_COMPENSATED,
    UNDO_ALREADY_REVERSED,
    UNDO_TARGET_CHANGED,
    LaterAction,
    undo_refusal,
    undo_skip,
)
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, AuditEvent, BulkBatch, BulkItem
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch, reject_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.progress import ledger
from app.services.bulk.submission import submit_batch
from app.services.bulk.undo import start_undo
from app.services.lifecycle.compensation import propose_compensation
from tests.builders import make_decision, make_operator, make_report, make_team, proposal_of, run_worker

P = ActionProposal


def _batch(app, team, count: int, *, fail_first: bool = False) -> str:
    """A finished batch of `count` posts, made by reviewer2 and approved by reviewer;
    with `fail_first` the platform refuses the first request for good (400)."""
    maker = make_operator(team.installation_id, "reviewer2")
    action = bulk_actions(db.session, team.installation_id)[0]
    batch_id = start_dry_run(maker, selection={"source": "list", "text": "\n".join(f"post:{n}" for n in range(count))},
                             action_key=action.key, decision_code=action.decision_code, reason="spam network")
    digest = submit_batch(maker, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    approve_batch(make_operator(team.installation_id, "reviewer"), batch_id, digest)
    if fail_first:
        team.demo_platform.state.configure(fail_next=1, fail_status=400)
    run_worker(app)
    db.session.expire_all()
    assert db.session.get(BulkBatch, batch_id).state == "completed"
    return batch_id


def _items(batch_id: str) -> list[tuple[BulkItem, ActionProposal | None]]:
    db.session.expire_all()
    return db.session.execute(select(BulkItem, P).outerjoin(P, P.id == BulkItem.proposal_id)
                              .where(BulkItem.batch_id == batch_id).order_by(BulkItem.position)).all()


def _refused(code: str, call, *args) -> ApiError:
    with pytest.raises(ApiError) as refused:
        call(*args)
    assert refused.value.code == code, refused.value
    return refused.value


def _counts() -> tuple[int, int, int]:
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(model)) for model in (BulkBatch, BulkItem, P))


def test_bulk_8_undo_skips_items_changed_since_and_compensates_the_rest_once(app, team):
    """BULK-8: 20 items, one failed at delivery, one target acted on again since, one
    compensated on its own: the undo lists the two skips with their reasons, leaves
    the failed one out, and restores the other 17 exactly once under four-eyes
    (FOUR-1: not the original's maker or approver, not the undo's maker)."""
    original_id = _batch(app, team, 20, fail_first=True)
    rows = _items(original_id)
    states = Counter(p.state for _, p in rows)
    assert states == {"applied": 19, "failed": 1}, states
    applied = [p for _, p in rows if p.state == "applied"]
    changed, compensated = applied[0], applied[1]
    make_decision(make_report(team, target=changed.target_reference))  # a newer takedown, awaiting approval
    assert proposal_of(db.session.scalar(select(P.report_id).where(
        P.target_reference == changed.target_reference, P.id != changed.id))) is not None
    propose_compensation(compensated.id, component_version_id=team.components["restore"], action_code="restore",
                         target=compensated.target, payload=compensated.payload, idempotency_key="one-by-one",
                         operator=make_operator(team.installation_id, "admin"))
    effects_before = len(team.demo_platform.state.effects)

    undoer = make_operator(team.installation_id, "admin")
    undo_id = start_undo(undoer, original_id, "the network was a false positive")
    undo = db.session.get(BulkBatch, undo_id)
    assert (undo.kind, undo.undoes_batch_id, undo.state) == ("undo", original_id, "submitted")
    assert undo.counts == {"would_act": 17, "skipped": 2, "not_applied": 1} and undo.item_count == 19
    items = _items(undo_id)
    skips = {item.undoes_proposal_id: item.skip_code for item, _ in items if item.skip_code}
    assert skips == {changed.id: UNDO_TARGET_CHANGED, compensated.id: UNDO_ALREADY_COMPENSATED}
    proposals = [p for _, p in items if p is not None]
    assert len(proposals) == 17 and all(
        (p.state, p.approval_mode, p.bulk_batch_id, p.action_code, p.compensates_proposal_id)
        == ("approval_required", "human", undo_id, "restore", item.undoes_proposal_id)
        for item, p in items if p is not None)
    db.session.expire_all()
    originals = {p.id: p.state for p in db.session.scalars(select(P).where(P.bulk_batch_id == original_id))}
    assert Counter(originals.values()) == {"compensation_required": 18, "applied": 1, "failed": 1}  # COMP-3
    assert originals[changed.id] == "applied"
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "bulk.undo_started"))
    assert audit.details["batch_digest"] == undo.batch_digest
    assert audit.details["undoes_batch_digest"] == db.session.get(BulkBatch, original_id).batch_digest

    _refused("bulk_undo_already_open", start_undo, make_operator(team.installation_id, "moderator"), original_id,
             "again, while one is open")
    for who in ("reviewer2", "reviewer", "admin"):  # the original's maker and approver, the undo's maker
        _refused("bulk_approval_refused", approve_batch, make_operator(team.installation_id, who), undo_id,
                 undo.batch_digest)
    assert db.session.get(BulkBatch, undo_id).state == "submitted"
    checker = make_operator(team.installation_id, "reviewer3", roles=["reviewer"])
    assert approve_batch(checker, undo_id, undo.batch_digest) == {"approved": 17, "skipped": 0}
    run_worker(app)
    db.session.expire_all()

    effects = team.demo_platform.state.effects[effects_before:]
    restored = Counter(e["reference"] for e in effects if e["effect"] == "visible")
    assert len(effects) == 17 and set(restored.values()) == {1}
    assert set(restored) == {p.target_reference for p in proposals}
    undo = db.session.get(BulkBatch, undo_id)
    book = ledger(db.session, undo)
    assert undo.state == "completed" and book.adds_up and (book["applied"], book["skipped"]) == (17, 2), book
    _refused("bulk_batch_already_undone", start_undo, undoer, original_id, "once more")


def test_bulk_8_undo_is_refused_with_a_clear_code_and_nothing_written(app, team):
    """BULK-8: a batch not finished, an undo of an undo, an auditor, a bad reason and
    a batch whose action names no compensation are each refused; nothing stored."""
    maker = make_operator(team.installation_id, "reviewer2")
    action = bulk_actions(db.session, team.installation_id)[0]
    pending = start_dry_run(maker, selection={"source": "list", "text": "post:1\npost:2"}, action_key=action.key,
                            decision_code=action.decision_code, reason="raid")
    undoer = make_operator(team.installation_id, "moderator")
    before = _counts()
    _refused("bulk_batch_not_finished", start_undo, undoer, pending, "too early")
    _refused("bulk_reason_invalid", start_undo, undoer, pending, " ")
    _refused("bulk_undo_forbidden", start_undo, make_operator(team.installation_id, "auditor"), pending, "not mine")
    _refused("bulk_batch_not_found", start_undo, undoer, "blk_nope", "no such batch")
    assert _counts() == before

    done = _batch(app, team, 3)
    undo_id = start_undo(undoer, done, "mistake")
    _refused("bulk_undo_unavailable", start_undo, undoer, undo_id, "undo the undo")
    reject_batch(make_operator(team.installation_id, "reviewer3", roles=["reviewer"]), undo_id,
                 db.session.get(BulkBatch, undo_id).batch_digest, "keep them down")
    # a rejected undo leaves room for another; what it proposed changed nothing
    again = start_undo(undoer, done, "second try")
    assert db.session.get(BulkBatch, again).counts["would_act"] == 3


def test_bulk_8_undos_started_at_once_make_one(app, team):
    """BULK-8: four operators undo the same batch at the same moment: exactly one
    undo is made, the others are refused with ``bulk_undo_already_open``, and each
    applied item is compensated once."""
    done = _batch(app, team, 3)
    undoers = [make_operator(team.installation_id, name).id for name in ("moderator", "reviewer", "reviewer2", "admin")]
    db.session.rollback()

    def attempt(operator_id):
        with app.app_context():
            from app.models import OperatorUser

            try:
                return start_undo(db.session.get(OperatorUser, operator_id), done, "all at once")
            except ApiError as error:
                return error.code

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, undoers))
    made = [r for r in results if r.startswith("blk")]
    assert len(made) == 1 and sorted(set(results) - set(made)) == ["bulk_undo_already_open"], results
    db.session.rollback()  # end this session's read snapshot (SQLite WAL)
    assert db.session.scalar(select(func.count()).select_from(BulkBatch).where(BulkBatch.undoes_batch_id == done)) == 1
    assert db.session.scalar(select(func.count()).select_from(P).where(P.compensates_proposal_id.is_not(None))) == 3


def test_bulk_8_an_action_without_compensation_cannot_be_undone(app, platform):
    """BULK-8: the action node names no compensating action → 409
    ``bulk_undo_unavailable``, nothing written."""

    def without_correction(graph):
        del graph["nodes"]["takedown"]["config"]["correction"]

    team = make_team(platform, edit_graph=without_correction)
    done = _batch(app, team, 2)
    before = _counts()
    _refused("bulk_undo_unavailable", start_undo, make_operator(team.installation_id, "moderator"), done, "undo it")
    assert _counts() == before


def test_bulk_8_what_changed_since_decides_the_skip():
    """BULK-8: the skip rule over later actions on an item's target, and which
    batches may be undone."""
    live = dict(state="approval_required", delivery_terminal=False)
    dead = dict(state="rejected", delivery_terminal=False)
    assert undo_skip([]) is None
    assert undo_skip([LaterAction(False, False, **dead)]) is None
    assert undo_skip([LaterAction(False, False, **live)]) == UNDO_TARGET_CHANGED
    assert undo_skip([LaterAction(False, False, "failed", True)]) is None  # failed for good: no effect
    assert undo_skip([LaterAction(True, False, **dead)]) is None  # a rejected compensation changed nothing
    assert undo_skip([LaterAction(False, True, **live),  # a reversal still scheduled: the undo cancels it
                      LaterAction(True, False, "applied", False)]) == UNDO_ALREADY_COMPENSATED
    assert undo_skip([LaterAction(False, True, **live)]) is None
    assert undo_skip([LaterAction(False, True, "applied", False)]) == UNDO_ALREADY_REVERSED
    assert undo_refusal("enforce", "completed", []) is None
    assert undo_refusal("enforce", "cancelled", ["rejected", "expired", "cancelled"]) is None
    assert undo_refusal("enforce", "running", [])[0] == "bulk_batch_not_finished"
    assert undo_refusal("enforce", "completed", ["submitted"])[0] == "bulk_undo_already_open"
    assert undo_refusal("enforce", "completed", ["completed"])[0] == "bulk_batch_already_undone"
    assert undo_refusal("undo", "completed", [])[0] == "bulk_undo_unavailable"
