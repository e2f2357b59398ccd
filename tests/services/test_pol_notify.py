"""Approvers are notified (SPEC POL-7): who is eligible, and notices through the outbox
by e-mail (a real aiosmtpd server on loopback) and by a signed webhook (a real HTTP
server on loopback), at most once per proposal, person and channel."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select
from standardwebhooks import Webhook
from werkzeug import Response

from app.domain.approval_policy import DEFAULT_SETTINGS, settings_to_json
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ApprovalNotice, ApprovalVote, OperatorUser, ReportEvidence
from app.services import approval_notices as notices
from app.services.lifecycle import sweeps
from app.services.uow import unit_of_work

from ..builders import PEER_AND_LEAD, decide_report, run_worker, set_approval_settings, set_operator_attributes, set_row
from ..smtp import loopback_smtp

SECRET = "whsec_" + base64.b64encode(b"approval-notice-test-secret-32by").decode()


@pytest.fixture
def smtp(app):
    with loopback_smtp(app) as inbox:
        yield inbox


def ids(operators) -> set[str]:
    return {o.id for o in operators}


def reviewers(installation_id: str) -> set[str]:
    """Active operators with the reviewer role (the default policy's factor)."""
    rows = db.session.scalars(select(OperatorUser).where(OperatorUser.installation_id == installation_id))
    return {o.id for o in rows if o.active and "reviewer" in o.roles}


def vote(proposal, operator_id: str, *, digest: str | None = None, expires_in: timedelta = timedelta(hours=1)) -> None:
    with unit_of_work() as uow:
        uow.session.add(
            ApprovalVote(
                installation_id=proposal.installation_id,
                proposal_id=proposal.id,
                approver_id=operator_id,
                decision="approved",
                payload_digest=digest or proposal.payload_digest,
                idempotency_key=f"test-{operator_id}-{digest}-{expires_in}",
                expires_at=utcnow() + expires_in,
            )
        )
        uow.commit()


def notice_rows(subject_id: str | None = None) -> list[ApprovalNotice]:
    db.session.rollback()
    query = select(ApprovalNotice).order_by(ApprovalNotice.operator_id, ApprovalNotice.channel)
    if subject_id:
        query = query.where(ApprovalNotice.subject_id == subject_id)
    return list(db.session.scalars(query))


def test_pol7_eligible_approvers_are_admitted_active_not_makers_and_not_yet_voted(app, world):
    """POL-7: an eligible approver is active, admitted by a factor of the recorded
    policies, not a maker (FOUR-1) and without a counting vote (POL-2): a vote bound to
    another digest or expired does not take anyone off the list."""
    proposal = decide_report(world, maker="reviewer2")  # reviewer2 holds the reviewer role too
    expected = reviewers(world.installation_id) - {world.users["reviewer2"]}
    assert world.users["reviewer"] in expected
    assert ids(notices.eligible_approvers(db.session, proposal)) == expected  # the maker is not

    vote(proposal, world.users["reviewer"], digest="sha256:" + "1" * 64)  # for another payload
    assert world.users["reviewer"] in ids(notices.eligible_approvers(db.session, proposal))
    vote(proposal, world.users["reviewer"], expires_in=timedelta(seconds=-1))  # expired
    assert world.users["reviewer"] in ids(notices.eligible_approvers(db.session, proposal))
    vote(proposal, world.users["reviewer"])  # counts now
    assert world.users["reviewer"] not in ids(notices.eligible_approvers(db.session, proposal))

    other = next(iter(expected - {world.users["reviewer"]}), None)
    if other:
        set_row(OperatorUser, other, active=False)
        assert other not in ids(notices.eligible_approvers(db.session, proposal))


def test_pol7_eligibility_follows_the_recorded_policy_factors(app, world):
    """POL-7: under "a peer and a lead" a reviewer is eligible (the peer factor), and
    an attribute-only factor admits only operators with the attribute."""
    lead_only = {
        "policies": [
            {
                "key": "lead_only",
                "label": "A lead",
                "factors": [{"key": "lead", "label": "lead", "count": 1, "roles": ["reviewer"],
                             "attributes": {"level": "lead"}}],
            }
        ],
        "routes": [{"policies": ["lead_only"]}],
    }
    set_approval_settings(world.installation_id, PEER_AND_LEAD)
    first = decide_report(world, 0)
    assert world.users["reviewer"] in ids(notices.eligible_approvers(db.session, first))
    set_approval_settings(world.installation_id, lead_only)
    set_operator_attributes(world.users["reviewer2"], attributes={"level": "lead"})
    second = decide_report(world, 1)
    assert ids(notices.eligible_approvers(db.session, second)) == {world.users["reviewer2"]}
    # the first keeps what it recorded when it was prepared (POL-3)
    assert world.users["reviewer"] in ids(notices.eligible_approvers(db.session, first))


def test_pol7_email_notices_arrive_exactly_once_per_eligible_approver(app, world, smtp):
    """POL-7: when a proposal starts waiting, its notices are created in the same
    transaction, one per eligible approver; the sender job, a second sender run and
    the sweep deliver each exactly once to the real SMTP server; the maker and
    ineligible operators get none; the message names the subject, the action and a
    link, never the evidence."""
    proposal = decide_report(world, maker="reviewer2")
    eligible = ids(notices.eligible_approvers(db.session, proposal))
    rows = notice_rows(proposal.id)
    assert {(n.operator_id, n.channel, n.state) for n in rows} == {(i, "email", "pending") for i in eligible}

    run_worker(app)  # the job enqueued after commit
    assert notices.send_pending_notices() == 0  # the sender again: nothing left
    sweeps.run_sweeps()
    assert sweeps.run_sweeps().approval_notices_sent == 0

    emails = {o.id: o.email for o in db.session.scalars(select(OperatorUser))}
    assert sorted(smtp.recipients()) == sorted(emails[i] for i in eligible)
    for person in ("reviewer2", "moderator", "admin2", "auditor"):  # the maker; no reviewer role
        assert world.user(person).email not in smtp.recipients()
    assert {n.state for n in notice_rows(proposal.id)} == {"sent"}

    message = smtp.messages()[0]
    body = message.get_content()
    assert f"https://console.example.org/proposals/{proposal.id}" in body
    assert proposal.target["reference"] in body and "Take the content down" in message["Subject"]
    for text in db.session.scalars(select(ReportEvidence.content_text).where(ReportEvidence.report_id == proposal.report_id)):
        if text:
            assert text not in body


def test_pol7_two_senders_at_once_send_each_notice_once(app, world, smtp):
    """POL-7: a notice is claimed before it is sent, so concurrent senders never send it twice."""
    proposal = decide_report(world)
    expected = len(notice_rows(proposal.id))
    assert expected >= 1
    results, barrier = [], threading.Barrier(2)

    def sender():
        with app.app_context():
            barrier.wait()
            results.append(notices.send_pending_notices())
            db.session.remove()

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(results) == expected
    assert len(smtp.recipients()) == expected == len(set(smtp.recipients()))


def test_pol7_no_channel_configured_makes_no_notice(app, world):
    """POL-7: without MAIL_SERVER and without a webhook nothing is queued (the inbox still counts)."""
    decide_report(world)
    assert notice_rows() == []


def test_pol7_a_failing_server_is_retried_with_backoff_then_the_notice_fails(app, world, smtp, clock):
    """POL-7: a send that fails is tried again after a growing delay; after the last
    attempt the notice is ``failed`` with the error."""
    from ..smtp import free_port

    app.config["MAIL_PORT"] = free_port()  # nothing listens there
    proposal = decide_report(world)
    one = notice_rows(proposal.id)[0]
    assert notices.send_pending_notices() == 0
    row = db.session.get(ApprovalNotice, one.id)
    assert (row.state, row.attempts) == ("pending", 1) and "ConnectionRefusedError" in row.last_error
    first_wait = row.available_at - utcnow()
    assert timedelta(seconds=notices.BACKOFF_SECONDS - 5) < first_wait <= timedelta(seconds=notices.BACKOFF_SECONDS)
    assert notices.send_pending_notices() == 0 and db.session.get(ApprovalNotice, one.id).attempts == 1  # not due
    for _ in range(notices.MAX_ATTEMPTS - 1):
        clock.advance(seconds=notices.BACKOFF_SECONDS * 2**notices.MAX_ATTEMPTS)
        notices.send_pending_notices()
    db.session.rollback()
    row = db.session.get(ApprovalNotice, one.id)
    assert (row.state, row.attempts) == ("failed", notices.MAX_ATTEMPTS) and row.last_error
    assert smtp.recipients() == []


def test_pol7_a_webhook_notice_reaches_a_loopback_server_signed(app, world, httpserver):
    """POL-7: with ``notify_webhook_url`` in the approval settings each eligible approver's
    notice is POSTed once as JSON with a valid Standard Webhooks signature, carrying
    only the subject, the action in words and a link."""
    app.config.update(NOTIFY_WEBHOOK_SECRET=SECRET, PUBLIC_URL="https://console.example.org")
    received = []

    def hook(request):
        received.append((dict(request.headers), request.get_data()))
        return Response("{}", status=200, content_type="application/json")

    httpserver.expect_request("/approvals", method="POST").respond_with_handler(hook)
    settings = settings_to_json(replace(DEFAULT_SETTINGS, notify_webhook_url=httpserver.url_for("/approvals")))
    set_approval_settings(world.installation_id, settings)
    proposal = decide_report(world)
    rows = notice_rows(proposal.id)
    assert rows and {n.channel for n in rows} == {"webhook"}  # no MAIL_SERVER: no e-mail
    run_worker(app)
    sweeps.run_sweeps()
    assert len(received) == len(rows)
    for headers, body in received:
        lowered = {k.lower(): v for k, v in headers.items()}
        document = Webhook(SECRET).verify(body, lowered)  # raises on a bad signature
        assert set(document) == {"type", "notice_id", "subject_id", "subject", "action", "link", "approver"}
        assert document["link"] == f"https://console.example.org/proposals/{proposal.id}"
        assert document["subject_id"] == proposal.id and document["action"] == "Take the content down"
    assert {json.loads(b)["approver"] for _, b in received} == {n.operator_id for n in rows}
    assert {n.state for n in notice_rows(proposal.id)} == {"sent"}


def test_pol7_a_webhook_without_a_signing_secret_is_not_sent(app, world, httpserver):
    """POL-7: a webhook notice is never sent unsigned: without NOTIFY_WEBHOOK_SECRET it
    fails after its attempts with the reason (nothing reaches the server)."""
    settings = settings_to_json(replace(DEFAULT_SETTINGS, notify_webhook_url=httpserver.url_for("/approvals")))
    set_approval_settings(world.installation_id, settings)
    proposal = decide_report(world)
    notices.send_pending_notices()
    row = notice_rows(proposal.id)[0]
    assert row.attempts == 1 and "NOTIFY_WEBHOOK_SECRET" in row.last_error
    assert httpserver.log == []


def test_pol7_a_proposal_decided_before_its_notices_went_out_sends_none(app, world, smtp):
    """POL-7: a notice whose proposal no longer waits for approval is not sent; it is
    closed with the reason."""
    from ..builders import approve

    proposal = decide_report(world)
    assert notice_rows(proposal.id)
    approve(world, proposal)
    assert notices.send_pending_notices() == 0
    assert {(n.state, n.last_error) for n in notice_rows(proposal.id)} == {
        ("failed", "the proposal no longer waits for approval")
    }
    assert smtp.recipients() == []
