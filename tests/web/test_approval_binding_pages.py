"""What the reviewer approves, in words (SPEC FOUR-5, issue 22): where the action goes
and how its answer is read, and whose decision it enforces and why, on the proposal's
approval panel and on the approval task list."""

from __future__ import annotations

import html
import json
import re

from app.models import ComponentVersion

from ..builders import decide_report, login, make_proposal, proposal_of, set_row

READS_404_AS_APPLIED = {
    "request": "POST /v1/takedowns/{target.reference}",
    "outcome": {"2xx": "'applied'", "4xx": "'applied'"},
}


def text_of(page: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities decoded, spaces folded."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))


def panel(page: str) -> str:
    start = page.index('id="approval-h"')
    return page[start : page.index("</section>", start)]


def test_four_5_the_approval_panel_says_where_it_goes_and_how_it_is_read(app, client, world, platform):
    """FOUR-5 (issue 22 (a)): a component that reads a 4xx as applied: the panel says
    the method, URL (host prominent), kind and the reading, and warns."""
    set_row(
        ComponentVersion,
        world.components["takedown"],
        implementation_kind="rest",
        implementation_reference=json.dumps(READS_404_AS_APPLIED),
    )
    proposal = decide_report(world)
    reference = proposal.target["reference"].replace(":", "%3A")
    login(client, "reviewer@example.com")

    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)

    words = text_of(panel(page))
    port = platform.url.rsplit(":", 1)[1].strip("/")
    assert (
        f"Sends POST http://127.0.0.1:{port}/v1/takedowns/{reference} · REST · "
        "a 2xx answer means applied, 4xx applied, 5xx retried"
    ) in words
    assert '<strong class="destination-host">127.0.0.1</strong>' in panel(page)
    assert "a 4xx answer (an error) is read as applied" in words


def test_four_5_the_approval_panel_names_the_decision_its_maker_and_rationale(app, client, world):
    """FOUR-5: the reviewer sees whose decision this enforces and why, in full and
    escaped, the maker's name and their text isolated in <bdi>."""
    from app.services.cases.reports import record_decision

    rationale = "Threat of harm <b>against</b> a named person, see the second post in the thread " * 3
    moderator = world.user("moderator")
    record_decision(world.report_ids[0], decision_code="remove_content", rationale=rationale, operator=moderator)
    proposal = proposal_of(world.report_ids[0])
    login(client, "reviewer@example.com")

    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)

    section = panel(page)
    assert "<b>against</b>" not in section and "&lt;b&gt;against&lt;/b&gt;" in section
    assert "<bdi>Maya Moderator</bdi>" in section
    assert f"Remove content — by Maya Moderator — “{rationale.strip()}”" in text_of(section)


def test_four_5_the_task_list_shows_the_host_and_the_decision_shortened(app, client, world, platform):
    """FOUR-5: each approval task says where it goes (host) and whose decision, the
    rationale shortened."""
    from app.services.cases.reports import record_decision

    rationale = "Threat of harm against a named person. " * 10
    moderator = world.user("moderator")
    record_decision(world.report_ids[0], decision_code="remove_content", rationale=rationale, operator=moderator)
    login(client, "reviewer@example.com")

    page = client.get("/tasks").get_data(as_text=True)

    words = text_of(page)
    assert "Sends to 127.0.0.1" in words
    assert "Remove content — by Maya Moderator — “Threat of harm against a named person." in words
    assert rationale.strip() not in words  # shortened on the list
    assert "<bdi>Maya Moderator</bdi>" in page


def test_four_5_a_compensation_says_who_proposed_it_and_why(app, client, team):
    """FOUR-5: a compensation's approval panel names who proposed it and what it undoes."""
    from sqlalchemy import select

    from app.extensions import db
    from app.models import ActionProposal

    applied = make_proposal(team, state="compensation_required")
    compensation = db.session.scalar(select(ActionProposal).where(ActionProposal.compensates_proposal_id == applied.id))
    login(client, f"admin@{team.slug}.example.com")

    page = client.get(f"/proposals/{compensation.id}").get_data(as_text=True)

    words = text_of(panel(page))
    assert "Compensation — proposed by Reviewer — undoes" in words
    assert "Sends POST " in words and "/actions/restore · webhook · " in words


def test_four_5_an_appeal_correction_says_who_decided_the_appeal_and_why(app, client, world, platform):
    """FOUR-5: a correction's approval panel names the appeal decision's maker, their
    rationale and the decision it overturns."""
    from ..services.test_appeals import appeal, applied_takedown, correction_proposal, overturn

    applied_takedown(world)
    result = overturn(world, appeal(world))
    from app.models import AppealCorrection

    [correction_id] = result.correction_ids
    proposal = correction_proposal(db_get(AppealCorrection, correction_id))
    login(client, "admin@example.com")

    page = client.get(f"/proposals/{proposal.id}").get_data(as_text=True)

    words = text_of(panel(page))
    assert (
        "Appeal correction — decided on appeal by Rita Reviewer — “Satire is allowed” — overturns Remove content"
    ) in words
    assert "/actions/restore · webhook · " in words


def db_get(model, row_id):
    from app.extensions import db

    db.session.rollback()
    return db.session.get(model, row_id)


def test_four_5_a_pds_delivery_says_what_is_read_back(app, client, world):
    """FOUR-5: an AT Protocol PDS component: the update it sends and the read-back
    that must confirm it, in words."""
    set_row(
        ComponentVersion,
        world.components["takedown"],
        implementation_kind="atproto_pds",
        implementation_reference="takedown record",
    )
    proposal = decide_report(world)
    login(client, "reviewer@example.com")

    words = text_of(panel(client.get(f"/proposals/{proposal.id}").get_data(as_text=True)))

    update = "/xrpc/com.atproto.admin.updateSubjectStatus · AT Protocol PDS · takedown record; applied only when GET "
    assert update in words
    status = "/xrpc/com.atproto.admin.getSubjectStatus reads back the takedown state with this action's reference"
    assert status in words


def test_four_5_a_temporary_action_shows_where_its_reversal_goes(app, client, world):
    """FOUR-5, TEMP-1: the scheduled reversal needs no second approval, so the panel
    says where it goes too."""
    proposal = decide_report(world, 0, code="suspend_account")
    login(client, "reviewer@example.com")

    words = text_of(panel(client.get(f"/proposals/{proposal.id}").get_data(as_text=True)))

    assert "/actions/suspend · webhook · " in words
    assert "Then its reversal: Sends POST " in words and "/actions/unsuspend · webhook · " in words


def test_four_5_an_end_now_says_who_proposed_it_and_what_it_ends(app, client, world, platform):
    """FOUR-5, TEMP-3: a proposal to end a temporary action now names its proposer,
    the action it ends and where the reversal goes."""
    from ..services.test_reversals import _replacement, suspended

    original = suspended(world, platform)
    replacement = _replacement(world, original, "end_now")
    login(client, "admin@example.com")

    words = text_of(panel(client.get(f"/proposals/{replacement.id}").get_data(as_text=True)))

    assert "End now — proposed by Rita Reviewer — ends " in words
    assert "/actions/unsuspend · webhook · " in words
