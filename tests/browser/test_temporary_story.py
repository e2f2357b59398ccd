"""A temporary suspension in Debian's Chromium (TEMP-1, TEMP-2, TEMP-4): the approval
panel shows the plan the digest covers, the applied action counts down to its end and
shows the planned reversal, and the page updates in place when the reversal applies,
then stops polling."""

from __future__ import annotations

from datetime import timedelta

from playwright.sync_api import expect
from sqlalchemy import select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal
from app.services.lifecycle import sweeps

from ..builders import decide_report, reload, set_row
from .conftest import POLL_SECONDS
from .test_console_stories import approve_in_page, sign_in
from .test_review_story import wait_until

AUTHOR = "user:4412"


def test_temp_countdown_planned_reversal_and_the_page_updating_when_it_lifts(page, world, platform, screenshots):
    """TEMP-1: the plan beside the digest; TEMP-4: the countdown; TEMP-2: the page follows
    the action until its reversal applies, then stops polling."""
    suspension = decide_report(world, 0, code="suspend_account")
    sign_in(page, "reviewer@example.com")
    page.goto(f"/proposals/{suspension.id}")
    assert page.js_errors == [], ("approval page", page.js_errors)
    expect(page.locator("#approves-plan")).to_contain_text(
        "Suspend the account for 3 minutes, then Lift the suspension"
    )
    expect(page.locator("#temporary-plan")).to_contain_text("suspend_account for 3 minutes, then unsuspend_account")
    approve_in_page(page, suspension.id)
    wait_until(lambda: reload(suspension).state == "applied", page)
    assert platform.state.accounts[AUTHOR] == "suspended"

    page.goto(f"/proposals/{suspension.id}")
    status = page.locator("#temporary-status")
    expect(status).to_have_attribute("data-state", "scheduled")
    expect(status.locator(".countdown")).to_contain_text("(in 2 min")  # a little under three minutes left
    expect(page.locator("#temporary")).to_contain_text("Planned reversal")
    expect(page.locator("#temporary")).to_contain_text('"reason_code": "suspension_ended"')
    expect(page.locator('#temporary[data-following="true"]')).to_be_attached()
    page.screenshot(path=str(screenshots / "temporary-scheduled.png"), full_page=True)
    assert page.js_errors == [], ("scheduled page", page.js_errors)

    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if r.url.endswith("/temporary") else None)
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    # Time passes: the reversal falls due; the sweep hands it to the worker (which runs without cron here).
    db.session.rollback()
    reversal = db.session.scalar(select(ActionProposal).where(ActionProposal.reverses_proposal_id == suspension.id))
    past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, reversal.id, not_before=past, next_attempt_at=past)
    sweeps.run_sweeps()
    expect(page.locator("#temporary-status")).to_have_attribute("data-state", "ended", timeout=30_000)
    expect(page.locator("#temporary-status")).to_contain_text("Its reversal was applied")
    polls_until_ended = len(polls)
    assert navigations == [], "the page reloaded; it should update in place"
    assert polls, "the temporary panel never polled"
    expect(page.locator('#temporary[data-following="false"]')).to_be_attached()
    page.wait_for_timeout(POLL_SECONDS * 3 * 1000)  # three polling intervals of silence
    assert len(polls) <= polls_until_ended + 1  # at most one already on its way
    assert platform.state.accounts[AUTHOR] == "active"
    page.screenshot(path=str(screenshots / "temporary-ended.png"), full_page=True)

    page.goto(f"/proposals/{reversal.id}")
    expect(page.locator("#temporary-status")).to_have_attribute("data-state", "reversal")
    expect(page.get_by_role("link", name="Suspend the account")).to_be_visible()
    assert page.js_errors == [], page.js_errors
