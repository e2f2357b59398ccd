"""QUEUE-6 (issue 25, a new user's findings): the proposal page's lead says what the
platform answered (HTTP status and an escaped excerpt), Operations' retrying list too,
and every absolute time on a page is one `<time>` element localised with its zone."""

from __future__ import annotations

import re
from pathlib import Path

from app.demo_queue import BUSY_ACCOUNT, seed_queue_demo

from ..builders import login, logout, make_proposal
from .test_queue_pages import _subject_id

EXCERPT = '<q class="excerpt">{&#34;error&#34;:&#34;scripted_failure&#34;}</q>'


def _section(page: str, marker: str, end: str = "</section>") -> str:
    start = page.rindex("<", 0, page.index(marker))  # from the tag holding `marker`
    return page[start : page.index(end, start)]


def _visible(html: str) -> str:
    """The text a reader sees: tags (and their attributes, tooltips included) dropped."""
    return re.sub(r"<[^>]+>", "", html)


def test_lead_says_the_platforms_status_and_answer_QUEUE_6(app, client, team):
    """QUEUE-6: a delivery that failed and will be retried says, at the top of its page,
    the failure in words with the platform's HTTP status and the escaped start of its
    answer (from the last attempt); no raw code shows beside the words (a tooltip only)."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=False)
    login(client, team.user("reviewer").email)
    lead = _section(client.get(f"/proposals/{proposal.id}").get_data(as_text=True), 'id="lead"')
    assert "The platform had an error of its own" in lead
    assert f"The platform answered HTTP 503: {EXCERPT}" in lead
    seen = _visible(lead)
    assert "platform_server_error" not in seen and not re.search(r"\bfailed\b(?! for good|;)", seen)
    assert 'title="platform_server_error"' in lead


def test_terminal_lead_says_the_refusal_QUEUE_6(app, client, team):
    """QUEUE-6: a delivery refused for good says HTTP 400 and the answer in its lead too."""
    proposal = make_proposal(team, state="failed", attempts=1, terminal=True)
    login(client, team.user("reviewer").email)
    lead = _section(client.get(f"/proposals/{proposal.id}").get_data(as_text=True), 'id="lead"')
    assert "Delivery failed for good." in lead and f"The platform answered HTTP 400: {EXCERPT}" in lead
    assert "platform_client_error" not in _visible(lead)


def test_operations_retrying_gives_words_status_and_excerpt_QUEUE_6(app, client, team):
    """QUEUE-6: Operations' retrying deliveries give the last failure in words with the
    status and excerpt of the last attempt, the code in small print only; the list reads
    them in the same query whatever its length."""
    from .test_query_counts import queries_for

    make_proposal(team, state="failed", attempts=1, terminal=False)
    login(client, team.user("admin").email)
    one = queries_for(app, client, "/operations")
    make_proposal(team, state="failed", attempts=2, terminal=False)
    assert queries_for(app, client, "/operations") == one
    retrying = _section(client.get("/operations").get_data(as_text=True), 'id="retrying"', "</table>")
    rows = retrying.split("<tr>")[2:]
    assert len(rows) == 2
    for row in rows:
        last = _section(row, 'data-label="Last failure"', "</td>")
        assert "The platform had an error of its own" in last and f"The platform answered HTTP 503: {EXCERPT}" in last
        assert _visible(last).count("platform_server_error") == 1
        assert '<small class="code">platform_server_error</small>' in last


def test_times_are_one_time_element_localised_with_their_zone_QUEUE_6():
    """QUEUE-6: one rule for absolute times: a `<time datetime=ISO>` reading
    "YYYY-MM-DD HH:MM:SS UTC" without script, which console.js localises showing the
    zone; plain-text messages say "HH:MM UTC"."""
    from datetime import UTC, datetime

    from app.domain.clock import clock_utc
    from app.web.formatting import time_tag

    moment = datetime(2026, 12, 1, 11, 34, 5, tzinfo=UTC)
    assert str(time_tag(moment)) == (
        '<time datetime="2026-12-01T11:34:05.000Z" title="2026-12-01T11:34:05.000Z UTC">2026-12-01 11:34:05 UTC</time>')
    assert clock_utc(moment) == "11:34 UTC"
    script = (Path(__file__).parents[2] / "static" / "console.js").read_text()
    assert 'timeZoneName: "short"' in script
    templates = Path(__file__).parents[2] / "templates"
    for path in templates.rglob("*.html"):
        assert "strftime" not in path.read_text(), f"{path}: render times with the time helper"


def test_claim_expiry_is_a_time_element_on_queue_and_subject_pages_QUEUE_6(app, client, world):
    """QUEUE-6: a claim's expiry on the queue and on the subject page is the `time`
    helper's element; the flash and the refusal say "until HH:MM UTC" alike."""
    seed_queue_demo()
    subject_id = _subject_id(BUSY_ACCOUNT)
    token = login(client, "moderator@example.com")
    page = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token, "next": "/queue?sort=most"},
                       follow_redirects=True).get_data(as_text=True)
    flash = re.search(r"Claimed until (\d\d:\d\d UTC): ", page)
    assert flash
    stamp = re.escape(flash.group(1)[:5])
    pattern = f'Claimed by you until <time datetime="[^"]+Z" title="[^"]+">\\d{{4}}-\\d\\d-\\d\\d {stamp}:\\d\\d UTC</time>'
    assert re.search(pattern, page)
    assert re.search(pattern, client.get(f"/queue/{subject_id}").get_data(as_text=True))
    logout(client, token)
    token = login(client, "reviewer2@example.com")
    refused = client.post(f"/queue/{subject_id}/claim", data={"csrf_token": token}, follow_redirects=True)
    assert f"is working on this subject until {flash.group(1)};" in refused.get_data(as_text=True)
