"""QUEUE-6: a proposal page leads with its state and the next step; failures are given
in words with the platform's status and an escaped excerpt of its answer; a delivery
that will be retried can be retried now, within its cycle's attempts."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.failures import EXCERPT_CHARS, body_excerpt, failure_words
from app.domain.proposal.lead import proposal_lead
from app.extensions import db
from app.models import AuditEvent, ConnectionAttempt

from ..builders import login, make_proposal, reload, run_worker
from ..conftest import CSRF_PATTERN


def _csrf(page: str) -> str:
    match = CSRF_PATTERN.search(page)
    return (match.group(1) or match.group(2)) if match else ""


def _page(client, team, proposal, who: str = "reviewer") -> str:
    login(client, team.user(who).email)
    return client.get(f"/proposals/{proposal.id}").get_data(as_text=True)


def test_failure_words_and_excerpt_rules_QUEUE_6():
    """QUEUE-6: every delivery code has a sentence (a new code reads as words, never
    bare); the excerpt is bounded, folded to one line, and kept as text."""
    for code in ("platform_client_error", "platform_server_error", "connection_failed", "connection_timeout",
                 "platform_request_timeout", "platform_rate_limited", "tls_certificate_invalid"):
        assert "_" not in failure_words(code) and failure_words(code).endswith(".")
    assert failure_words("some_new_code") == "Some new code."
    assert failure_words(None) is None
    assert body_excerpt(b"") is None and body_excerpt(None) is None
    assert body_excerpt(b'{"error":\n  "bad\\u0000"}\x00') == '{"error": "bad\\u0000"}'
    long = body_excerpt(("é" * 1000).encode())
    assert len(long) == EXCERPT_CHARS and long.endswith("…")
    assert body_excerpt(b"\xff\xfe<b>") == "\ufffd\ufffd<b>"  # escaped where shown, not here


def test_lead_rule_names_who_acts_QUEUE_6():
    """QUEUE-6: the lead offers the viewer's own action only."""
    assert proposal_lead("approval_required", False, can_decide=True).action == "decide"
    assert proposal_lead("approval_required", False).action is None
    assert proposal_lead("failed", False, can_retry_now=True).action == "retry_now"
    assert proposal_lead("failed", True, can_retry=True).headline == "Delivery failed for good."
    assert proposal_lead("queued", False, accepted=True).headline.startswith("Accepted by the platform")


def test_failed_page_leads_with_state_and_says_what_platform_answered_QUEUE_6(app, client, team):
    """QUEUE-6: a delivery refused for good (400) leads the page with "Delivery failed
    for good" before the facts; the failure reads in words with HTTP 400 and the start
    of the platform's answer, escaped; the code only in small print."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=True)
    row = db.session.scalar(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id))
    assert row.response_status == 400 and "scripted_failure" in row.response_excerpt
    page = _page(client, team, proposal)
    lead = page.index('id="lead"')
    assert lead < page.index('id="payload-digest"') and lead < page.index('id="live"')
    assert "Delivery failed for good." in page[lead : lead + 600]
    assert "The platform refused the request as wrong" in page
    assert "The platform answered HTTP 400: <q class=\"excerpt\">{&#34;error&#34;:&#34;scripted_failure&#34;}</q>" in page
    assert '<small class="code">platform_client_error</small>' in page
    assert "<code>platform_client_error</code>" not in page


def test_retry_now_starts_the_next_attempt_within_the_cycle_QUEUE_6(app, client, team):
    """QUEUE-6 (RTRY): "Retry now" on a failed delivery that will be retried makes it
    due at once, audited, without a new cycle; the worker then delivers it; a replay of
    the form retries nothing twice; once applied there is nothing to retry (409)."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=False)
    assert reload(proposal).next_attempt_at > utcnow()
    page = _page(client, team, proposal)
    lead = page[page.index('id="lead"') :]
    assert "Delivery failed; it will be retried." in lead[:800] and "Retry now" in lead[:2000]
    key = re.search(r'name="idempotency_key" value="([^"]+)"', lead).group(1)
    form = {"csrf_token": _csrf(page), "idempotency_key": key}
    answer = client.post(f"/proposals/{proposal.id}/retry-now", data=form)
    assert answer.status_code == 303
    row = reload(proposal)
    assert row.next_attempt_at <= utcnow() and (row.delivery_cycle, row.delivery_attempt_count) == (1, 1)
    assert client.post(f"/proposals/{proposal.id}/retry-now", data=form).status_code == 303  # replay
    audits = db.session.scalar(select(func.count()).select_from(AuditEvent).where(
        AuditEvent.target_id == proposal.id, AuditEvent.action == "action.retry_now_requested"))
    assert audits == 1
    run_worker(app)
    assert reload(proposal).state == "applied" and reload(proposal).delivery_attempt_count == 2
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Retry now" not in page and "Applied on the platform." in page
    form["idempotency_key"] = "another-key"
    refused = client.post(f"/proposals/{proposal.id}/retry-now", data=form)
    assert refused.status_code == 409 and "can be retried now" in refused.get_data(as_text=True)


def test_moderator_cannot_retry_now_QUEUE_6(app, client, team):
    """QUEUE-6: only those who may retry deliveries see and use "Retry now"."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=False)
    page = _page(client, team, proposal, who="moderator")
    assert "Retry now" not in page
    answer = client.post(f"/proposals/{proposal.id}/retry-now",
                         data={"csrf_token": _csrf(page), "idempotency_key": "k1"})
    assert answer.status_code == 403
    assert reload(proposal).next_attempt_at > utcnow()


def test_account_action_names_the_account_everywhere_QUEUE_6(app, client, world, platform):
    """QUEUE-6: a suspension names the account (its name and reference), not the post
    it was reported through: in the page's title, the proposals list, the report page
    and Operations' lists; one query names a whole page's subjects."""
    from app.models import ReportEvidence
    from app.services.lifecycle.dispatch import deliver

    from ..builders import approve, decide_report

    suspension = decide_report(world, 0, code="suspend_account")
    evidence = db.session.scalar(select(ReportEvidence).where(ReportEvidence.report_id == suspension.report_id))
    post, account, name = evidence.target_reference, evidence.author_reference, evidence.author_name
    assert suspension.target["reference"] == post and account and name
    title = f"Suspend the account {name} ({account})"
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{suspension.id}").get_data(as_text=True)
    h1 = page[page.index("<h1") : page.index("</h1>")]
    assert f"Suspend the account <bdi>{name}</bdi> ({account})" in h1 and f"<title>{title}" in page  # FOUR-10
    listed = client.get("/proposals").get_data(as_text=True)
    assert f"the account <strong>{name}</strong> (<code>{account}</code>)" in listed
    report = client.get(f"/reports/{suspension.report_id}").get_data(as_text=True)
    assert f"the account <strong>{name}</strong>" in report
    platform.state.configure(fail_next=1, fail_status=503)
    approve(world, suspension)
    assert deliver(suspension.id).state == "failed"
    operations = client.get("/operations").get_data(as_text=True)
    retrying = operations[operations.index('id="retrying"') :]
    retrying = retrying[: retrying.index("</table>")]
    assert f"the account <strong>{name}</strong>" in retrying and "attempt 1 of at most 8" in retrying
    assert "The platform had an error of its own" in retrying and 'class="countdown"' in retrying
    assert "Nothing is stuck." not in operations


def test_live_panel_brings_the_end_time_without_reload_QUEUE_6(app, client, world, platform):
    """QUEUE-6: after approval the self-updating delivery panel also sends the lead and the
    temporary panel (htmx out-of-band), so the end time and its ticking countdown show
    without a reload; the "this page follows it" notice is marked to go once it ended."""
    from app.services.lifecycle.dispatch import deliver

    from ..builders import decide_report

    suspension = decide_report(world, 0, code="suspend_account")
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{suspension.id}").get_data(as_text=True)
    form = {"csrf_token": _csrf(page), "decision": "approved", "payload_digest": suspension.payload_digest,
            "idempotency_key": re.search(r'id="idempotency_key" name="idempotency_key" type="hidden" value="([^"]+)"', page).group(1)}
    answer = client.post(f"/proposals/{suspension.id}/decision", data=form, follow_redirects=True)
    assert 'class="notice notice-follows"' in answer.get_data(as_text=True)
    assert deliver(suspension.id).state == "applied"
    live = client.get(f"/proposals/{suspension.id}/live", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'id="lead"' in live and live.count('hx-swap-oob="true"') == 2
    temporary = live[live.index('id="temporary"') :]
    assert 'data-state="scheduled"' in temporary and 'class="countdown" data-expires=' in temporary
    assert "Applied on the platform." in live and 'data-terminal="true"' in live
    assert 'id="lead-ends"' in live and "then its planned reversal ends it" in live


def test_appeal_page_leads_with_its_state_and_what_is_left_QUEUE_6(app, client, world, platform):
    """QUEUE-6: an open appeal says who decides it (the contested decision's maker
    cannot); once reversed, how many corrections wait; once carried out, nothing."""
    from app.services.cases.appeals import decide_appeal

    from ..builders import appeal_through_api, approve, decide_report, proposal_of

    approve(world, decide_report(world))
    run_worker(app)
    appeal_id = appeal_through_api(client, world)

    def lead(who: str) -> str:
        login(client, f"{who}@example.com")
        page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
        client.post("/logout", data={"csrf_token": _csrf(page)})
        start = page.index('id="lead"')
        assert start < page.index('class="facts"')
        return page[start : page.index("</section>", start)]

    assert "Waiting for your decision." in lead("reviewer2") and 'href="#decide-h"' in lead("reviewer2")
    assert "Waiting for a decision." in lead("moderator")
    decide_appeal(appeal_id, outcome="reversed", rationale="satire", operator=world.user("reviewer2"))
    assert "Decided: reversed. 1 correction waits to be carried out." in lead("reviewer")
    approve(world, proposal_of(world.report_ids[0]), reviewer="admin")
    run_worker(app)
    assert "Decided: reversed. Its corrections are carried out." in lead("reviewer")
