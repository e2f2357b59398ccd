"""A moderator's day in Debian's Chromium (issue 25, SPEC QUEUE-1..5): land on the
queue, filter it, claim the account with 30 reports by keyboard, decide it and see it
leave the queue; then a reviewer lands on their waiting list and approves the action,
reading the maker's decision and rationale. Screenshots at 1280 and 390 px."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from app.demo_queue import BUSY_ACCOUNT, seed_queue_demo

from ..builders import proposal_of, reload
from .test_console_stories import sign_in, sign_out
from .test_review_story import check_layout, check_narrow

RATIONALE = "Thirty threats to one person from this account in two days."


def test_a_moderators_day_QUEUE_1_QUEUE_2_QUEUE_3_QUEUE_5(page, world, screenshots, app):
    """QUEUE-1..5: the queue, its filter, a keyboard claim, one decision for 30 reports,
    the reviewer's landing and approval with the maker's rationale in view."""
    seed_queue_demo()
    sign_in(page, "moderator@example.com")
    expect(page).to_have_url(re.compile(r"/queue$"))  # QUEUE-5
    expect(page.get_by_role("heading", name="Queue")).to_be_visible()
    expect(page.get_by_text(re.compile(r"\d+ overdue"))).to_be_visible()  # QUEUE-4
    check_layout(page, screenshots, "queue")
    check_narrow(page, screenshots, "queue")

    page.keyboard.press("/")  # the search box
    expect(page.get_by_label("Search")).to_be_focused()
    page.keyboard.type("goalline")
    page.get_by_label("Sort").select_option("most")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_label("Search")).to_have_value("goalline")  # the form keeps its values
    rows = page.locator("table[data-keys=rows] tbody tr")
    expect(rows).to_have_count(2)  # the account and its post:1003 (the demo platform's)
    row = rows.first  # most reports first
    expect(row).to_contain_text("Account")
    expect(row).to_contain_text("goalline_greg")
    expect(row.locator("td[data-label='Open reports']")).to_have_text("30")

    page.keyboard.press("j")  # the first row, visibly
    expect(row).to_have_class(re.compile("kb-current"))
    page.keyboard.press("c")  # claim it (htmx swaps the row)
    claimed = re.compile(r"Claimed by you until \S.* \d\d:\d\d:\d\d")  # the time helper, localised (QUEUE-6)
    expect(page.locator("table[data-keys=rows] tbody tr").first).to_contain_text(claimed)
    page.keyboard.press("Enter")  # open the subject
    expect(page.get_by_role("heading", name=re.compile("Account"))).to_contain_text(BUSY_ACCOUNT)
    expect(page.locator("table[data-keys=rows] tbody tr")).to_have_count(30)
    check_layout(page, screenshots, "queue-subject")
    check_narrow(page, screenshots, "queue-subject")

    page.keyboard.press("d")  # the decision
    decision = page.get_by_label("Decision", exact=True)
    expect(decision).to_be_focused()
    decision.select_option("remove_content")
    page.get_by_label("Rationale").fill(RATIONALE)
    page.get_by_role("button", name="Decide 30 reports").click()
    expect(page).to_have_url(re.compile(r"/queue$"))
    expect(page.locator(".notice-ok")).to_contain_text("Decided 30 reports about Account user:5120 (goalline_greg)")
    listed = page.locator("table[data-keys=rows] tbody code.ref", has_text=re.compile(f"^{BUSY_ACCOUNT}$"))
    expect(listed).to_have_count(0)
    page.screenshot(path=str(screenshots / "queue-after-decision.png"), full_page=True)
    assert page.js_errors == []
    sign_out(page)

    db_proposal = proposal_of(_first_report_about(BUSY_ACCOUNT))
    assert db_proposal is not None and reload(db_proposal).state == "approval_required"
    sign_in(page, "reviewer@example.com")
    expect(page).to_have_url(re.compile(r"/tasks$"))  # QUEUE-5: what waits for them
    page.locator(f"a[href='/proposals/{db_proposal.id}']").first.click()
    maker = page.locator("#approves-decision")
    expect(maker).to_contain_text("Remove content")
    expect(maker).to_contain_text(RATIONALE)
    page.get_by_label("Payload digest you reviewed").fill(page.locator("#payload-digest").inner_text())
    page.get_by_label("Approve").check()
    page.get_by_role("button", name="Record decision").click()
    expect(page.locator(".notice").first).to_be_visible()
    assert reload(db_proposal).state != "approval_required"
    page.screenshot(path=str(screenshots / "queue-reviewer-approved.png"), full_page=True)
    assert page.js_errors == []


def _first_report_about(reference: str) -> str:
    from sqlalchemy import select

    from app.extensions import db
    from app.models import Report, ReportSubject

    db.session.rollback()
    return db.session.scalar(select(Report.id).join(ReportSubject, ReportSubject.id == Report.subject_id)
                             .where(ReportSubject.reference == reference).order_by(Report.created_at, Report.id))
