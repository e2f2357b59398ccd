"""QUEUE-6 in Debian's Chromium at 1280 px: the proposal page leads with its state and
next step; the "this page follows it" notice goes once the delivery failed for good;
the failure reads in words with the platform's status and answer; the attempts table
fits the page even with a long PDS URL; a retrying delivery's countdown ticks and
"Retry now" sends it at once."""

from __future__ import annotations

from playwright.sync_api import expect
from sqlalchemy import select

from app.extensions import db
from app.models import ConnectionAttempt

from ..builders import decide_report, reload, set_row
from .test_console_stories import approve_in_page, sign_in
from .test_review_story import wait_until

LONG_URL = ("https://pds.example.com/xrpc/com.atproto.admin.updateSubjectStatus?subject="
            "at%3A%2F%2Fdid%3Aplc%3Aewvi7nxzyoun6zhxrhs64oiz%2Fapp.bsky.feed.post%2F3kgq2wtdxzc2b")
LONG_ANSWER = '{"error":"InvalidRequest","message":"' + "Record not found in this repository; " * 8 + '"}'


def fits(page, selector: str) -> dict:
    """Whether `selector` scrolls sideways, its tallest row, and its narrowest cell."""
    return page.evaluate(
        """(selector) => {
          const t = document.querySelector(selector);
          const cells = [...t.querySelectorAll('td')];
          return {scrolls: t.scrollWidth > t.clientWidth + 1 || document.documentElement.scrollWidth > innerWidth,
                  tallest: Math.max(...[...t.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height)),
                  narrowest: Math.min(...cells.map(c => c.getBoundingClientRect().width))};
        }""",
        selector,
    )


def test_failed_for_good_leads_the_page_in_words_and_the_table_fits_QUEUE_6(page, world, platform, screenshots):
    """QUEUE-6: after approval the notice says the page follows the delivery; once it fails
    for good (a 400) the notice goes and the lead says so at the top, in words, with the
    platform's status; the attempts table fits 1280 px with a long URL and answer."""
    proposal = decide_report(world, 0)
    platform.state.configure(fail_next=5, fail_status=400)
    sign_in(page, "reviewer@example.com")
    approve_in_page(page, proposal.id)
    expect(page.locator("#lead")).to_be_visible()
    wait_until(lambda: reload(proposal).delivery_terminal, page)
    expect(page.locator("#live[data-terminal=true]")).to_be_attached()
    expect(page.locator(".notice-follows")).to_have_count(0)
    lead = page.locator("#lead")
    expect(lead).to_contain_text("Delivery failed for good.")
    expect(lead).to_contain_text("The platform refused the request as wrong")
    assert lead.bounding_box()["y"] < 300  # the first thing under the title
    expect(page.locator("#live")).to_contain_text("The platform answered HTTP 400")

    db.session.rollback()
    attempt = db.session.scalar(select(ConnectionAttempt).where(ConnectionAttempt.proposal_id == proposal.id))
    set_row(ConnectionAttempt, attempt.id, url=LONG_URL, response_excerpt=LONG_ANSWER[:300])
    page.reload()
    url = page.locator("table.attempts code.url").first
    expect(url).to_have_attribute("title", LONG_URL)
    measured = fits(page, "table.attempts")
    page.screenshot(path=str(screenshots / "queue6-failed-1280.png"), full_page=True)
    assert not measured["scrolls"], measured
    assert measured["tallest"] < 260 and measured["narrowest"] >= 30, measured
    assert page.js_errors == [], page.js_errors


def test_retrying_countdown_ticks_and_retry_now_sends_it_QUEUE_6(page, world, platform, screenshots):
    """QUEUE-6: a delivery that failed and will be retried says so at the top, with its
    next attempt counting down each second; "Retry now" sends it at once."""
    proposal = decide_report(world, 0)
    platform.state.configure(fail_next=1, fail_status=503)
    sign_in(page, "reviewer@example.com")
    approve_in_page(page, proposal.id)
    wait_until(lambda: reload(proposal).state == "failed", page)
    page.goto(f"/proposals/{proposal.id}")
    lead = page.locator("#lead")
    expect(lead).to_contain_text("Delivery failed; it will be retried.")
    countdown = lead.locator(".countdown")
    first = countdown.inner_text()
    page.wait_for_function(
        "(before) => { const c = document.querySelector('#lead .countdown'); return c && c.textContent !== before; }",
        arg=first,
    )
    page.screenshot(path=str(screenshots / "queue6-retrying-1280.png"), full_page=True)
    page.get_by_role("button", name="Retry now").click()
    wait_until(lambda: reload(proposal).state == "applied", page)
    expect(page.locator("#lead")).to_contain_text("Applied on the platform.")
    assert reload(proposal).delivery_attempt_count == 2
    assert page.js_errors == [], page.js_errors
