"""Emergency action on the console (POL-6): the "Act now (emergency)" form with its
consequences in words, the proposal page's emergency and review state, the reviews
page reached from Operations, the review form, and "Emergency" in every list."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionApproval, ActionProposal, EmergencyReview
from app.web.badges import emergency_badge, task_row

from ..builders import login, make_operator, make_proposal, reload, run_worker

REASON = "Live-streamed attack spreading now; every minute it stays up it is re-shared"


def counts():
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m)) for m in (ActionApproval, EmergencyReview))


def test_act_now_from_the_proposal_page_and_review_it(app, client, team):
    """POL-6: the emergency role sees "Act now (emergency)" with its consequences; a thin
    reason is refused with its code and nothing stored; a reason of substance sends the
    action at once; the page, the list and Operations show it; a reviewer disagrees
    from the page and lands on the compensation it proposed."""
    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    proposal = make_proposal(team, maker="lead")
    token = login(client, lead.email)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Act now (emergency)" in page and "sent at once, without a second person" in page
    url = f"/proposals/{proposal.id}/emergency"
    form = {"csrf_token": token, "payload_digest": proposal.payload_digest, "idempotency_key": "page-1"}
    refused = client.post(url, data={**form, "reason": "urgent!"})
    assert refused.status_code == 400 and 'data-code="emergency_reason_too_thin"' in refused.get_data(as_text=True)
    assert counts() == (0, 0) and reload(proposal).state == "approval_required"
    done = client.post(url, data={**form, "reason": REASON})
    assert done.status_code == 303
    run_worker(app)
    assert reload(proposal).state == "applied" and team.demo_platform.state.requests_seen >= 1
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert 'id="emergency"' in page and "approved this alone in an emergency" in page and REASON in page
    assert "A second reviewer must review it by" in page and "Act now (emergency)" not in page
    assert "You cannot review it." in page  # the one who acted
    listing = client.get("/proposals").get_data(as_text=True)
    assert listing.count(">Emergency</span>") == 1
    reviews = client.get("/emergency-reviews").get_data(as_text=True)
    assert 'data-state="open"' in reviews and REASON in reviews and ">Emergency</span>" in reviews
    operations = client.get("/operations").get_data(as_text=True)
    assert "/emergency-reviews" in operations and "No review of an emergency action is overdue." in operations

    other = app.test_client()  # a second person
    reviewer = login(other, team.user("reviewer").email)
    page = other.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Your retrospective review" in page and "Act now (emergency)" not in page
    review = db.session.scalar(select(EmergencyReview))
    response = other.post(f"/emergency-reviews/{review.id}",
                          data={"csrf_token": reviewer, "verdict": "disagree",
                                "reason": "Routine spam, not an emergency"})
    assert response.status_code == 303
    compensation = db.session.scalar(
        select(ActionProposal).where(ActionProposal.compensates_proposal_id == proposal.id))
    assert response.headers["Location"].endswith(f"/proposals/{compensation.id}")
    page = other.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    assert "Disagreed by" in page and "the compensation proposed" in page


def test_overdue_reviews_on_operations_and_the_reviews_page(app, client, team, clock):
    """POL-6: after the configured time (24 h) Operations lists the overdue review and
    the reviews page puts it first, marked overdue."""
    from app.services.lifecycle.emergency import act_in_emergency

    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    late = make_proposal(team)
    act_in_emergency(late.id, reason=REASON, payload_digest=late.payload_digest, idempotency_key="e-1", operator=lead)
    clock.advance(hours=25)
    fresh = make_proposal(team)
    act_in_emergency(fresh.id, reason=REASON, payload_digest=fresh.payload_digest, idempotency_key="e-2", operator=lead)
    login(client, team.user("reviewer").email)
    operations = client.get("/operations").get_data(as_text=True)
    listed = operations.split('id="emergency-overdue-list"')[1]
    assert "1 review overdue." in operations and late.id in listed and fresh.id not in listed
    page = client.get("/emergency-reviews").get_data(as_text=True)
    rows = re.findall(r'<tr data-review="[^"]+" data-state="open"( class="overdue")?>', page)
    assert rows == [' class="overdue"', ""]
    assert page.index(late.id) < page.index(fresh.id)


def test_the_emergency_mark_in_rows(app, team):
    """POL-6: rows written in Python mark an emergency action (and only it)."""
    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    proposal = make_proposal(team)
    assert str(emergency_badge(proposal)) == ""
    from app.services.lifecycle.emergency import act_in_emergency

    act_in_emergency(proposal.id, reason=REASON, payload_digest=proposal.payload_digest, idempotency_key="e-1",
                     operator=lead)
    row = reload(proposal)
    assert ">Emergency</span>" in str(emergency_badge(row))
    assert ">Emergency</span>" in str(emergency_badge({"emergency": True}))
    from types import SimpleNamespace as NS

    from app.web.console.forms import EmptyForm

    with app.test_request_context("/tasks"):
        task = NS(id="task-1", due_at=row.created_at, state="completed")
        html = str(task_row({"task": task, "proposal": row, "assignee": None, "claim": NS(allowed=False, shown=False),
                             "release": NS(allowed=False)}, {}, {}, {}, EmptyForm(meta={"csrf": False})))
    assert ">Emergency</span>" in html


def test_pol6_an_open_review_is_what_comes_next(app, client, team):
    """POL-6: an emergency proposal whose retrospective review is open does not say
    "Nothing more to do": its lead says a second person must review it by the due time,
    linking the review; the summary says "Emergency action by NAME, reviewed afterwards"."""
    from app.services.lifecycle.emergency import act_in_emergency

    lead = make_operator(team.installation_id, "lead", roles=["moderator", "reviewer", "emergency"])
    proposal = make_proposal(team)
    act_in_emergency(proposal.id, reason=REASON, payload_digest=proposal.payload_digest, idempotency_key="e-n",
                     operator=lead)
    run_worker(app)
    assert reload(proposal).state == "applied"
    login(client, team.user("reviewer").email)
    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)
    block = re.sub(r"\s+", " ", re.search(r'<section id="lead".*?</section>', page, re.S).group(0))
    assert "Nothing more to do" not in block
    assert "a second person must review this emergency action by" in block and 'href="#emergency"' in block
    row = re.sub(r"\s+", " ", page.split("<dt>Approval</dt>")[1].split("</dd>")[0])
    assert f"Emergency action by <bdi>{lead.display_name}</bdi>, reviewed afterwards" in row
