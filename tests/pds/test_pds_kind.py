"""The console against a real PDS (SPEC PLAT-1, PLAT-2, PLAT-4, PLAT-5): takedowns
approved by a second person reach the PDS through its admin API, are confirmed by
reading them back, and appeal corrections reverse them.

The `pds` fixture starts the real PDS; a PDS that cannot start fails these tests.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import (
    ActionProposal,
    ActionReceiptRecord,
    AppealCorrection,
    ComponentVersion,
    ConnectionAttempt,
    ConnectionVersion,
)
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.lifecycle.dispatch import deliver
from app.services.uow import Actor

from ..builders import approve, make_proposal, make_report, make_team, reload, set_row
from .harness import XrpcError, account_subject, record_subject


def pds_team(pds, subject_kind: str, password: str | None = None):
    """A team whose takedown and restore components are the PDS kind (the takedown
    reference is the operation id; the admin password is the connection's secret)."""
    team = make_team(pds.url)
    set_row(ConnectionVersion, team.connection_version_id, bearer_token=password or pds.admin_password)
    for slug, reference in (("takedown", f"takedown {subject_kind}"), ("restore", f"reversal {subject_kind}")):
        set_row(
            ComponentVersion,
            team.components[slug],
            implementation_kind="atproto_pds",
            implementation_reference=reference,
        )
    return team


def purposes(proposal) -> list[tuple[int, str, int | None]]:
    db.session.rollback()
    rows = db.session.scalars(
        select(ConnectionAttempt)
        .where(ConnectionAttempt.proposal_id == proposal.id)
        .order_by(ConnectionAttempt.started_at)
    )
    return [(a.attempt_number, a.purpose, a.response_status) for a in rows]


def observed(proposal) -> list[tuple[str, str]]:
    db.session.rollback()
    rows = db.session.scalars(select(ActionReceiptRecord).where(ActionReceiptRecord.proposal_id == proposal.id))
    return [(r.source, r.status) for r in rows]


def correct_on_appeal(team, report) -> ActionProposal:
    """The appeal reversed by one reviewer, the correction approved by another: its proposal."""
    appeal_id = file_appeal(
        report.id,
        statement="It was satire.",
        actor=Actor("operator", team.user("moderator").id),
        installation_id=team.installation_id,
    ).appeal_id
    result = decide_appeal(
        appeal_id, outcome="reversed", rationale="Satire is allowed", operator=team.user("reviewer2")
    )
    [correction_id] = result.correction_ids
    db.session.rollback()
    proposal = db.session.get(ActionProposal, db.session.get(AppealCorrection, correction_id).proposal_id)
    assert proposal.state == "approval_required"
    approve(team, proposal, reviewer="admin")
    return reload(proposal)


def test_plat5_post_taken_down_after_four_eyes_is_not_served_and_the_appeal_restores_it(app, pds):
    """PLAT-1, PLAT-2, PLAT-4, PLAT-5: moderator decides, reviewer approves; the PDS stops
    serving the post (getRecord fails), getSubjectStatus shows our reference; the
    receipt is observed; every request is an attempt row; the appeal correction serves
    it again."""
    author = pds.create_account()
    post = pds.create_post(author, "a post the console takes down")
    team = pds_team(pds, "record")
    report = make_report(team, target=post.uri)
    proposal = make_proposal(team, state="queued", report=report)  # maker moderator, checker reviewer

    outcome = deliver(proposal.id)

    assert outcome.state == "applied", outcome
    with pytest.raises(XrpcError) as gone:
        pds.get_record(post.uri)
    assert (gone.value.status, gone.value.error) == (400, "RecordNotFound")
    status = pds.get_subject_status(record_subject(post.uri, post.cid))
    assert status["takedown"] == {"applied": True, "ref": proposal.operation_id}
    # No CID in the report: the record's status is read first, then updated, then read back.
    assert purposes(proposal) == [(1, "recheck", 200), (1, "update", 200), (1, "read-back", 200)]
    assert observed(proposal) == [("observed", "applied")]

    restore = correct_on_appeal(team, report)
    assert deliver(restore.id).state == "applied"

    assert pds.get_record(post.uri)["cid"] == post.cid
    assert pds.get_subject_status(record_subject(post.uri, post.cid))["takedown"]["applied"] is False
    assert observed(restore) == [("observed", "applied")]


def test_plat5_account_takedown_blocks_the_session_and_the_appeal_restores_it(app, pds):
    """PLAT-1, PLAT-5: an account takedown (the reported post's author) refuses the
    account's sign-in with AccountTakedown; the appeal correction restores it."""
    account = pds.create_account()
    post = pds.create_post(account)
    team = pds_team(pds, "account")
    report = make_report(team, target=post.uri)
    proposal = make_proposal(team, state="queued", report=report)

    assert deliver(proposal.id).state == "applied"

    with pytest.raises(XrpcError) as refused:
        pds.create_session(account)
    assert (refused.value.status, refused.value.error) == (401, "AccountTakedown")
    status = pds.get_subject_status(account_subject(account.did))
    assert status["takedown"] == {"applied": True, "ref": proposal.operation_id}
    assert purposes(proposal) == [(1, "update", 200), (1, "read-back", 200)]

    restore = correct_on_appeal(team, report)
    assert deliver(restore.id).state == "applied"

    assert pds.create_session(account)["did"] == account.did


def test_plat2_unknown_subject_and_wrong_password_are_terminal(app, pds):
    """PLAT-2: a record the PDS does not hold is terminal platform_subject_not_found; a
    wrong admin password is terminal platform_auth_failed and changes nothing."""
    author = pds.create_account()
    post = pds.create_post(author)
    team = pds_team(pds, "record")
    missing = make_proposal(team, state="queued", report=make_report(team, target=f"{post.uri}zz"))

    gone = deliver(missing.id)

    assert (gone.state, gone.error_code, gone.terminal) == ("failed", "platform_subject_not_found", True)

    locked_out = pds_team(pds, "account", password="not-the-admin-password")
    proposal = make_proposal(locked_out, state="queued", report=make_report(locked_out, target=post.uri))

    refused = deliver(proposal.id)

    assert (refused.state, refused.error_code, refused.terminal) == ("failed", "platform_auth_failed", True)
    assert purposes(proposal) == [(1, "update", 401)]
    assert pds.create_session(author)["did"] == author.did


def test_plat5_worker_killed_between_update_and_read_back_takes_down_once(app, pds, tmp_path):
    """PLAT-2, PLAT-5 crash trial: a worker is killed (SIGKILL) after the PDS applied the
    takedown and before its read-back; after the lease runs out and a sweep, the next
    worker reads the status first, sees our reference, sends no second update, and the
    proposal is applied with one observed receipt and one applied audit row."""
    import signal

    from sqlalchemy import func

    from app.models import AuditEvent
    from app.services.lifecycle import sweeps

    from ..e2e.test_crashes import run_crashing_worker, time_passes

    account = pds.create_account()
    team = pds_team(pds, "account")
    proposal = make_proposal(team, state="queued", report=make_report(team, target=account.did))

    assert run_crashing_worker(app, tmp_path, "before_read_back:1") == -signal.SIGKILL
    assert reload(proposal).state == "applying"
    with pytest.raises(XrpcError):
        pds.create_session(account)  # the update reached the PDS before the worker died
    time_passes()
    sweeps.run_sweeps()
    assert run_crashing_worker(app, tmp_path, "") == 0

    final = reload(proposal)
    assert final.state == "applied"
    assert [(n, purpose) for n, purpose, _ in purposes(proposal)] == [(1, "update"), (1, "read-back"), (2, "recheck")]
    status = pds.get_subject_status(account_subject(account.did))
    assert status["takedown"] == {"applied": True, "ref": proposal.operation_id}
    assert observed(proposal) == [("observed", "applied")]
    applied = db.session.scalar(
        select(func.count()).where(AuditEvent.action == "workflow.action_applied", AuditEvent.target_id == proposal.id)
    )
    assert applied == 1
