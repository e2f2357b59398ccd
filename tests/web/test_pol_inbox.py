"""The approver's inbox and the navigation's count (SPEC POL-7)."""

from __future__ import annotations

import re
from datetime import timedelta

from app.domain.clock import utcnow
from app.models import ApprovalVote
from app.services.uow import unit_of_work

from ..builders import add_reports, decide_report, login, logout, set_approval_settings, set_operator_attributes
from .test_query_counts import queries_for

LEAD_ONLY = {
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


def badge(html: str) -> int | None:
    """The navigation's count, or None when no Inbox link is shown."""
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', html, re.S).group(1)
    found = re.search(r'data-inbox-count="(\d+)"', nav)
    return int(found.group(1)) if found else None


def inbox_ids(client) -> list[str]:
    response = client.get("/inbox")
    assert response.status_code == 200
    return re.findall(r'<tr data-proposal="([^"]+)"', response.get_data(as_text=True))


def test_pol7_the_inbox_lists_what_waits_for_the_operator_newest_first(app, client, world):
    """POL-7: an eligible approver's inbox lists the proposals awaiting their approval,
    newest first, each linked with its subject and how long it has waited; the
    navigation counts them."""
    first = decide_report(world, 0)
    second = decide_report(world, 1)
    login(client, "reviewer@example.com")
    page = client.get("/inbox").get_data(as_text=True)
    assert inbox_ids(client) == [second.id, first.id]
    assert f'href="/proposals/{second.id}"' in page
    assert second.target["reference"] in page and "0 min" in page and "One reviewer" in page
    assert badge(client.get("/reports").get_data(as_text=True)) == 2


def test_pol7_makers_voters_and_ineligible_operators_see_nothing(app, client, world):
    """POL-7: the maker (FOUR-1), an operator with a counting vote (POL-2) and one no
    factor admits have nothing in their inbox and no count in the navigation."""
    proposal = decide_report(world, maker="reviewer2")
    token = login(client, "reviewer2@example.com")  # the maker
    assert inbox_ids(client) == [] and badge(client.get("/reports").get_data(as_text=True)) is None
    logout(client, token)
    token = login(client, "auditor@example.com")  # no factor admits an auditor
    assert inbox_ids(client) == [] and badge(client.get("/reports").get_data(as_text=True)) is None
    logout(client, token)

    login(client, "reviewer@example.com")
    assert inbox_ids(client) == [proposal.id]
    with unit_of_work() as uow:
        uow.session.add(
            ApprovalVote(
                installation_id=proposal.installation_id,
                proposal_id=proposal.id,
                approver_id=world.users["reviewer"],
                decision="approved",
                payload_digest=proposal.payload_digest,
                idempotency_key="inbox-test",
                expires_at=utcnow() + timedelta(hours=1),
            )
        )
        uow.commit()
    assert inbox_ids(client) == [] and badge(client.get("/reports").get_data(as_text=True)) is None
    assert "Nothing waits for your approval." in client.get("/inbox").get_data(as_text=True)


def test_pol7_the_inbox_follows_the_factors_attributes(app, client, world):
    """POL-7: under a policy whose one factor needs the attribute level=lead, only the
    lead's inbox has the proposal."""
    set_approval_settings(world.installation_id, LEAD_ONLY)
    set_operator_attributes(world.users["admin"], attributes={"level": "lead"})  # admin holds reviewer too
    proposal = decide_report(world)
    token = login(client, "reviewer@example.com")
    assert inbox_ids(client) == []
    logout(client, token)
    login(client, "admin@example.com")
    assert inbox_ids(client) == [proposal.id]
    assert "A lead" in client.get("/inbox").get_data(as_text=True)
    assert badge(client.get("/reports").get_data(as_text=True)) == 1


def test_pol7_the_inbox_and_the_count_cost_fixed_queries(app, client, world):
    """POL-7: the inbox page and the navigation's count run a fixed number of queries
    whatever the number of waiting proposals."""
    decide_report(world, 0)
    login(client, "reviewer@example.com")
    before = queries_for(app, client, "/inbox")
    add_reports(world, 8)
    for index in range(1, 10):
        decide_report(world, index)
    assert len(inbox_ids(client)) == 10
    assert queries_for(app, client, "/inbox") == before
    # the operator, the mark (for the open proposals' recorded routes), the rows,
    # labels, and the subjects' names (none: no account target); the navigation's
    # count is the inbox's own length
    assert before <= 5


def test_pol7_the_inbox_says_when_only_the_newest_are_shown(app, client, world, monkeypatch):
    """POL-7: past `INBOX_LIMIT` the inbox lists the newest and says how many it shows
    (the limit as the service applies it; 1 here, standing for 200)."""
    from app.services import approval_inbox

    monkeypatch.setattr(approval_inbox, "INBOX_LIMIT", 1)
    decide_report(world, 0)
    newest = decide_report(world, 1)
    login(client, "reviewer@example.com")
    assert inbox_ids(client) == [newest.id]
    assert "The 1 newest are shown." in client.get("/inbox").get_data(as_text=True)
