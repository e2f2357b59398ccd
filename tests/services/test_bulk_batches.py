"""Dry run, submission and the one approval of a bulk batch: what is refused and
what is counted (SPEC BULK-1..5, BULK-9)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.domain.states import Move
from app.extensions import db
from app.models import ActionApproval, ActionProposal, AuditEvent, BulkBatch, BulkItem, Decision, Report, move_batch_items
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch, reject_batch
from app.services.bulk.dry_runs import SelectionRefused, start_dry_run
from app.services.bulk.progress import ledger
from app.services.bulk.submission import submit_batch
from app.services.lifecycle.approval import decide_proposal
from tests.builders import make_operator, make_proposal, make_report, run_worker


def counts() -> tuple[int, ...]:
    return tuple(
        db.session.scalar(select(func.count()).select_from(model))
        for model in (BulkBatch, BulkItem, ActionProposal, Report, Decision, AuditEvent)
    )


def dry_run(team, text=None, *, source="list", maker="moderator", **selection):
    action = bulk_actions(db.session, team.installation_id)[0]
    value = {"source": source, **({"text": text} if text is not None else {}), **selection}
    batch_id = start_dry_run(
        make_operator(team.installation_id, maker),
        selection=value,
        action_key=action.key,
        decision_code=action.decision_code,
        reason="coordinated spam",
    )
    return db.session.get(BulkBatch, batch_id)


def submitted(team, text, maker="moderator"):
    batch = dry_run(team, text, maker=maker)
    digest = submit_batch(make_operator(team.installation_id, maker), batch.id, batch.dry_run_digest)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    return db.session.get(BulkBatch, batch.id), digest


def applied_single(app, team, reference):
    """An ordinary single decision on `reference`, approved and applied."""
    return make_proposal(team, state="applied", report=make_report(team, target=reference))


def test_bulk_1_bad_lines_are_answered_line_by_line_and_nothing_is_stored(app, team):
    before = counts()
    with pytest.raises(SelectionRefused) as refused:
        dry_run(team, "post:1\nnot a reference\npost:1\npost:2")
    assert [(line.line, line.code) for line in refused.value.lines] == [
        (2, "bulk_reference_invalid"),
        (3, "bulk_subject_duplicate"),
    ]
    assert counts() == before


def test_bulk_5_over_the_cap_is_refused_and_nothing_is_stored(app, team):
    before = counts()
    with pytest.raises(SelectionRefused) as refused:
        dry_run(team, "\n".join(f"post:{n}" for n in range(1001)))
    assert [line.code for line in refused.value.lines] == ["bulk_selection_over_cap"]
    assert counts() == before


def test_bulk_2_the_dry_run_counts_each_outcome_and_sends_nothing(app, team):
    done = applied_single(app, team, "post:900")
    assert done.state == "applied"
    app.config["BULK_PROTECTED_SUBJECTS"] = ["post:901"]
    effects = len(team.demo_platform.state.effects)
    batch = dry_run(team, "post:900\npost:901\npost:902\npost:903")
    assert batch.state == "dry_run"
    assert batch.counts == {"would_act": 2, "already_applied": 1, "protected": 1, "invalid": 0, "duplicate": 0}
    items = db.session.scalars(select(BulkItem).where(BulkItem.batch_id == batch.id).order_by(BulkItem.position)).all()
    assert [(i.subject_reference, i.outcome, i.line) for i in items] == [
        ("post:900", "already_applied", 1),
        ("post:901", "protected", 2),
        ("post:902", "would_act", 3),
        ("post:903", "would_act", 4),
    ]
    assert len(team.demo_platform.state.effects) == effects
    assert db.session.scalar(select(func.count()).select_from(ActionProposal).where(
        ActionProposal.bulk_batch_id == batch.id)) == 0


def test_bulk_2_a_subject_under_way_elsewhere_is_a_duplicate(app, team):
    first, _ = submitted(team, "post:1\npost:2")
    second = dry_run(team, "post:2\npost:3")
    assert second.counts["duplicate"] == 1 and second.counts["would_act"] == 1
    assert first.state == "submitted"


def test_bulk_3_submission_makes_one_proposal_per_item_on_the_batch_case(app, team):
    batch, digest = submitted(team, "post:1\npost:2\npost:3")
    assert batch.state == "submitted" and batch.batch_digest == digest
    proposals = db.session.scalars(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch.id)).all()
    assert len(proposals) == 3
    assert len({p.payload_digest for p in proposals}) == 3 and len({p.operation_id for p in proposals}) == 3
    assert {p.state for p in proposals} == {"approval_required"}
    assert {p.target["reference"] for p in proposals} == {"post:1", "post:2", "post:3"}
    case = db.session.get(Report, batch.report_id)
    assert case.state == "decided" and case.public_reference == batch.public_reference
    assert {p.report_id for p in proposals} == {case.id}


def test_bulk_3_a_maker_cannot_approve_and_an_item_is_not_approved_alone(app, team):
    batch, digest = submitted(team, "post:1\npost:2", maker="reviewer2")
    before = counts()
    with pytest.raises(ApiError) as refused:
        approve_batch(make_operator(team.installation_id, "reviewer2"), batch.id, digest)
    assert refused.value.code == "bulk_approval_refused"
    with pytest.raises(ApiError) as moderator:
        approve_batch(make_operator(team.installation_id, "moderator"), batch.id, digest)
    assert moderator.value.code == "bulk_approval_refused"
    item = db.session.scalar(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch.id).limit(1))
    with pytest.raises(ApiError) as alone:
        decide_proposal(item.id, decision="approved", payload_digest=item.payload_digest, reason=None,
                        idempotency_key="alone", operator=make_operator(team.installation_id, "reviewer"))
    assert alone.value.code == "action_decided_with_its_batch"
    assert counts() == before


def test_bulk_3_the_approval_is_bound_to_the_batch_digest(app, team):
    batch, digest = submitted(team, "post:1\npost:2")
    before = counts()
    with pytest.raises(ApiError) as refused:
        approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, "sha256:" + "0" * 64)
    assert refused.value.code == "bulk_batch_digest_mismatch"
    assert counts() == before
    result = approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    assert result == {"approved": 2, "skipped": 0}
    approvals = db.session.scalars(select(ActionApproval).join(
        ActionProposal, ActionProposal.id == ActionApproval.proposal_id).where(
        ActionProposal.bulk_batch_id == batch.id)).all()
    assert len(approvals) == 2
    assert all(a.payload_digest == db.session.get(ActionProposal, a.proposal_id).payload_digest for a in approvals)
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "bulk.approved"))
    assert audit.details["batch_digest"] == digest


def test_bulk_4_a_drifted_selection_refuses_the_approval_and_writes_nothing(app, team):
    batch, digest = submitted(team, "\n".join(f"post:{n}" for n in range(1, 11)))
    applied_single(app, team, "post:1")
    applied_single(app, team, "post:2")  # 2 of 10 now already applied: 20 % > 10 %
    db.session.rollback()  # a fresh read: the worker committed in its own session
    before = counts()
    with pytest.raises(ApiError) as refused:
        approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    assert refused.value.code == "bulk_selection_drifted"
    assert counts() == before
    assert db.session.get(BulkBatch, batch.id).state == "submitted"


def test_bulk_4_within_the_drift_a_changed_item_is_skipped_with_its_code(app, team):
    batch, digest = submitted(team, "\n".join(f"post:{n}" for n in range(1, 21)))
    applied_single(app, team, "post:1")  # 1 of 20: 5 %
    result = approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    assert result == {"approved": 19, "skipped": 1}
    skipped = db.session.scalar(select(BulkItem).where(BulkItem.batch_id == batch.id, BulkItem.skip_code.is_not(None)))
    assert (skipped.subject_reference, skipped.skip_code) == ("post:1", "bulk_subject_already_applied")
    run_worker(app)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    book = ledger(db.session, db.session.get(BulkBatch, batch.id))
    assert book.adds_up and (book["applied"], book["skipped"]) == (19, 1)


def test_bulk_4_a_subject_protected_since_the_dry_run_is_skipped_the_rest_queued(app, team):
    """BULK-4: the frozen subjects are classified again by where they stand (their
    mapping is not re-run): one protected since is skipped with its code; the others
    get one approval each and are queued in the same write."""
    batch, digest = submitted(team, "\n".join(f"post:{n}" for n in range(1, 21)))
    app.config["BULK_PROTECTED_SUBJECTS"] = ["post:3"]
    try:
        result = approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    finally:
        app.config["BULK_PROTECTED_SUBJECTS"] = []
    assert result == {"approved": 19, "skipped": 1}
    skipped = db.session.scalar(select(BulkItem).where(BulkItem.batch_id == batch.id, BulkItem.skip_code.is_not(None)))
    assert (skipped.subject_reference, skipped.skip_code) == ("post:3", "bulk_subject_protected")
    states = dict(db.session.execute(select(ActionProposal.state, func.count()).where(
        ActionProposal.bulk_batch_id == batch.id).group_by(ActionProposal.state)).all())
    assert states == {"queued": 19, "cancelled": 1}
    approvals = db.session.scalar(select(func.count()).select_from(ActionApproval).join(
        ActionProposal, ActionProposal.id == ActionApproval.proposal_id).where(ActionProposal.bulk_batch_id == batch.id))
    assert approvals == 19


def test_bulk_3_two_moves_in_one_write_must_chain():
    """BULK-3: approve-then-enqueue in one UPDATE; a second move that does not start
    where the first ends is refused before anything is written."""
    with pytest.raises(ValueError):
        move_batch_items(None, "blk_x", Move.APPROVE, then=Move.CLAIM)


def test_bulk_9_reports_about_one_subject_are_decided_together(app, team):
    reports = [make_report(team, target="post:77") for _ in range(3)] + [make_report(team, target="post:78")]
    batch = dry_run(team, source="reports", filter={"target_reference": "post:77"})
    assert batch.counts["would_act"] == 1
    item = db.session.scalar(select(BulkItem).where(BulkItem.batch_id == batch.id))
    assert sorted(item.report_ids) == sorted(r.id for r in reports[:3])
    digest = submit_batch(make_operator(team.installation_id, "moderator"), batch.id, batch.dry_run_digest)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    for report in reports[:3]:
        report = db.session.get(Report, report.id)
        assert report.state == "decided"
        decision = db.session.scalar(select(Decision).where(Decision.report_id == report.id))
        assert decision.decision_code == db.session.get(BulkBatch, batch.id).decision_code
    assert db.session.get(Report, reports[3].id).state == "open"
    proposal = db.session.scalar(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch.id))
    assert proposal.report_id in {r.id for r in reports[:3]}
    approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    run_worker(app)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    assert db.session.get(ActionProposal, proposal.id).state == "applied"


def test_bulk_3_a_rejected_batch_sends_nothing(app, team):
    batch, digest = submitted(team, "post:1\npost:2")
    effects = len(team.demo_platform.state.effects)
    reject_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest, "not spam")
    run_worker(app)
    db.session.rollback()  # a fresh read: the worker committed in its own session
    batch = db.session.get(BulkBatch, batch.id)
    assert batch.state == "rejected"
    book = ledger(db.session, batch)
    assert book.adds_up and book["cancelled"] == 2
    assert len(team.demo_platform.state.effects) == effects



def test_bulk_4_reports_arrived_since_the_dry_run_count_as_drift(app, team):
    """BULK-4: a filter over open reports resolved again names subjects reported since."""
    for n in range(10):
        make_report(team, target=f"post:{300 + n}")
    batch = dry_run(team, source="reports", filter={"category": ""} | {"queue": team.queue_id})
    assert batch.counts["would_act"] == 10
    digest = submit_batch(make_operator(team.installation_id, "moderator"), batch.id, batch.dry_run_digest)
    make_report(team, target="post:400")
    make_report(team, target="post:401")
    with pytest.raises(ApiError) as refused:
        approve_batch(make_operator(team.installation_id, "reviewer"), batch.id, digest)
    assert refused.value.code == "bulk_selection_drifted" and "20%" in refused.value.message
