"""The REST kind against the demo platform's plain REST API (SPEC PLAT-3, PLAT-4)."""

from __future__ import annotations

import json
import threading

from sqlalchemy import select

from app.extensions import db
from app.models import ActionReceiptRecord, ComponentVersion, ConnectionAttempt, ConnectionVersion
from app.services.lifecycle.dispatch import deliver

from ..builders import make_due, make_proposal, make_report, make_team, reload, set_row

REMOVE = {
    "request": "POST /v2/moderation/requests",
    "body": "{post: target.reference, action: 'remove', note: payload.reason_code}",
    "outcome": {"2xx": "request.state == 'done' && 'applied' || 'accepted'", "404": "'failed'"},
    "read_back": {
        "request": "GET /v2/posts/{target.reference}/moderation",
        "value": "visibility",
        "expected": "removed",
    },
}


def rest_team(platform, reference=REMOVE):
    """A team whose takedown component is the REST kind against the demo platform's plain API."""
    team = make_team(platform)
    set_row(
        ComponentVersion,
        team.components["takedown"],
        implementation_kind="rest",
        implementation_reference=json.dumps(reference),
    )
    return team


def attempts(proposal) -> list[tuple]:
    db.session.rollback()
    rows = db.session.scalars(
        select(ConnectionAttempt)
        .where(ConnectionAttempt.proposal_id == proposal.id)
        .order_by(ConnectionAttempt.started_at)
    )
    return [(a.attempt_number, a.purpose, a.method, a.url.split("/v2/")[1], a.response_status) for a in rows]


def receipts(proposal) -> list[ActionReceiptRecord]:
    db.session.rollback()
    return list(db.session.scalars(select(ActionReceiptRecord).where(ActionReceiptRecord.proposal_id == proposal.id)))


def test_plat3_rest_kind_applies_confirms_by_read_back_and_writes_an_observed_receipt(app, platform):
    """PLAT-3, PLAT-4: the update in the API's own shape, its outcome read by JMESPath,
    the read-back confirms; both requests are attempt rows; the receipt is observed."""
    team = rest_team(platform)
    proposal = make_proposal(team, state="queued", report=make_report(team, target="post:1001"))

    outcome = deliver(proposal.id)

    assert outcome.state == "applied", outcome
    assert platform.state.content["post:1001"] == "removed"
    assert [e["api"] for e in platform.state.effects] == ["rest"]
    assert attempts(proposal) == [
        (1, "update", "POST", "moderation/requests", 201),
        (1, "read-back", "GET", "posts/post%3A1001/moderation", 200),
    ]
    [receipt] = receipts(proposal)
    assert (receipt.source, receipt.status) == ("observed", "applied")
    assert receipt.receipt["provider_request_id"].startswith("observed:read-back:")
    assert reload(proposal).last_receipt["status"] == "applied"


def effect_event(platform) -> threading.Event:
    """An event set when the demo platform (a thread of this process) applies an effect."""
    landed = threading.Event()

    class Effects(list):
        def append(self, effect):
            super().append(effect)
            landed.set()

    platform.state.effects = Effects(platform.state.effects)
    return landed


def test_plat3_retry_after_a_lost_answer_reads_back_first_and_applies_once(app, platform):
    """PLAT-3 idempotency: the answer is lost (timeout) after the platform applied it;
    the next attempt reads back first, sees the change and sends nothing again."""
    team = rest_team(platform)
    proposal = make_proposal(team, state="queued", report=make_report(team, target="post:1002"))
    set_row(ConnectionVersion, team.connection_version_id, timeout_seconds=0.3)
    platform.state.configure(response_delay_seconds=0.6)
    landed = effect_event(platform)

    first = deliver(proposal.id)

    assert (first.state, first.error_code, first.terminal) == ("failed", "connection_timeout", False)
    platform.state.configure(response_delay_seconds=0)
    assert landed.wait(5)  # the slow request lands
    assert platform.state.content["post:1002"] == "removed"  # it arrived; the answer did not
    make_due(proposal)

    second = deliver(proposal.id)

    assert second.state == "applied"
    assert len(platform.state.effects) == 1
    assert [(n, purpose) for n, purpose, *_ in attempts(proposal)] == [(1, "update"), (2, "recheck")]


def test_plat3_read_back_that_disagrees_is_a_retryable_failure(app, platform):
    """PLAT-3: an update the read-back does not confirm fails, retryably."""
    disagreeing = {**REMOVE, "read_back": {**REMOVE["read_back"], "expected": "gone"}}
    team = rest_team(platform, disagreeing)
    proposal = make_proposal(team, state="queued", report=make_report(team, target="post:1003"))

    outcome = deliver(proposal.id)

    assert (outcome.state, outcome.error_code, outcome.terminal) == ("failed", "platform_read_back_disagrees", False)
    rows = db.session.scalars(
        select(ConnectionAttempt).where(
            ConnectionAttempt.proposal_id == proposal.id, ConnectionAttempt.purpose == "read-back"
        )
    )
    assert [r.error_code for r in rows] == ["platform_read_back_disagrees"]


def test_plat3_declared_failure_status_and_no_read_back(app, platform):
    """PLAT-3: a 404 the component maps to 'failed' is the platform's failed receipt
    (terminal); without a read-back the outcome alone decides."""
    no_read_back = {k: v for k, v in REMOVE.items() if k != "read_back"}
    team = rest_team(platform, no_read_back)
    unknown = make_proposal(team, state="queued", report=make_report(team, target="post:9999"))
    known = make_proposal(team, state="queued", report=make_report(team, target="post:1004"))

    refused, applied = deliver(unknown.id), deliver(known.id)

    assert (refused.state, refused.error_code, refused.terminal) == ("failed", "platform_refused", True)
    assert applied.state == "applied"
    assert [r.source for r in receipts(known)] == ["sync"]
    assert attempts(known) == [(1, "update", "POST", "moderation/requests", 201)]
    assert [(n, purpose, status) for n, purpose, _, _, status in attempts(unknown)] == [(1, "update", 404)]


def test_plat4_proposal_page_shows_which_request_each_attempt_row_was(app, client, platform):
    """PLAT-4: the attempt table names each row's purpose, with method, URL, status,
    class and digests."""
    from ..builders import login

    team = rest_team(platform)
    proposal = make_proposal(team, state="queued", report=make_report(team, target="post:1005"))
    assert deliver(proposal.id).state == "applied"
    login(client, f"reviewer@{team.slug}.example.com")

    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)

    # each attempt's request starts with what it was for (QUEUE-6's table: one Request column)
    assert '<th scope="col">Request</th>' in page and 'data-label="Request"' in page
    assert ">update</span>: POST" in page and ">read-back</span>: GET" in page
    assert "/v2/posts/post%3A1005/moderation" in page and "observed" in page
