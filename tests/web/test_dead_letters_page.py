"""The dead letters on the Operations page (CONN-4): grouped, listed with the digest
of the list, retried in bulk by a form that carries that digest."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import AuditEvent

from ..builders import login, make_proposal, make_team, reload


@pytest.fixture
def team(app, platform):
    return make_team(platform)


def signed_in(client, team, who="reviewer"):
    return login(client, f"{who}@{team.slug}.example.com")


def form_of(page: str) -> dict:
    """The retry form's hidden fields as the page rendered them."""
    form = page[page.index('action="/operations/dead-letters/retry"') :]
    return {
        name: value
        for name, value in re.findall(r'name="(\w+)" type="hidden" value="([^"]*)"', form[: form.index("</form>")])
    }


def test_conn4_the_page_groups_lists_and_retries_all_listed(app, client, team):
    """CONN-4: groups by connection and error code, the list's digest in the form;
    "retry all listed" starts a cycle for each and says so."""
    proposals = [make_proposal(team, state="failed") for _ in range(2)]
    signed_in(client, team)
    page = client.get("/operations").get_data(as_text=True)
    assert "Dead letters" in page and "platform_client_error" in page and "Platform API" in page
    fields = form_of(page)
    assert fields["list_digest"].startswith("sha256:") and fields["list_digest"] in page
    answer = client.post("/operations/dead-letters/retry", data={**fields, "scope": "all"})
    assert answer.status_code == 303
    page = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert "Retry requested for 2 failed deliveries, each in its own new delivery cycle." in page
    assert all(reload(p).delivery_cycle == 2 for p in proposals)
    assert "No failed deliveries." in page


def test_conn4_retry_selected_and_a_stale_page_is_refused(app, client, team):
    """CONN-4: a ticked selection is retried; a second post from the same (now
    stale) page with another key is refused 409 dead_letters_changed, as HTML and
    as JSON, and changes nothing."""
    a, b = (make_proposal(team, state="failed") for _ in range(2))
    signed_in(client, team)
    fields = form_of(client.get("/operations").get_data(as_text=True))
    answer = client.post("/operations/dead-letters/retry", data={**fields, "scope": "selected", "proposal_ids": [a.id]})
    assert answer.status_code == 303
    assert (reload(a).delivery_cycle, reload(b).delivery_cycle) == (2, 1)
    stale = {**fields, "idempotency_key": "another-key", "scope": "all"}
    refused = client.post("/operations/dead-letters/retry", data=stale)
    assert refused.status_code == 409 and "dead_letters_changed" in refused.get_data(as_text=True)
    as_json = client.post("/operations/dead-letters/retry", data=stale, headers={"Accept": "application/json"})
    assert (as_json.status_code, as_json.json["error"]["code"]) == (409, "dead_letters_changed")
    assert reload(b).delivery_cycle == 1
    # the same post again (a double submit) is a replay: nothing twice
    again = client.post("/operations/dead-letters/retry", data={**fields, "scope": "selected", "proposal_ids": [a.id]})
    assert again.status_code == 303 and reload(a).delivery_cycle == 2
    actions = select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "action.retry_requested")
    assert db.session.scalar(actions) == 1


def test_conn4_an_auditor_sees_dead_letters_but_cannot_retry(app, client, team):
    """CONN-4: retry is for reviewers and admins; an auditor's page has no form buttons."""
    make_proposal(team, state="failed")
    signed_in(client, team, "auditor")
    page = client.get("/operations").get_data(as_text=True)
    assert "platform_client_error" in page and "Retry selected" not in page and 'name="proposal_ids"' not in page
