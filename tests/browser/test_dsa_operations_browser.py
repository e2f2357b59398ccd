"""DSA-3 in Debian's Chromium at 1280 px: Operations lists a statement the
Transparency Database refused, with its error in words, in a table that fits the page;
an admin requeues it and the counts say so; the proposal page shows its statement."""

from __future__ import annotations

from playwright.sync_api import expect

from app.extensions import db
from app.models import DsaStatement
from app.services.dsa.sweep import submit_due_statements

from ..services.test_dsa_submission import pending_statements
from ..services.test_dsa_sweep import tdb_connection
from .test_console_stories import sign_in
from .test_queue6_browser import fits


def test_dsa3_a_refused_statement_is_listed_in_words_and_requeued(page, world, tdb, screenshots):
    """DSA-3: the refused statement reads field by field in the database's words, the
    table does not scroll sideways with its 68-character puid, and "Requeue as is"
    moves it back to waiting, said on the page."""
    tdb_connection(world, tdb)
    puids = pending_statements(world, 3, broken={2})
    assert submit_due_statements() == 2
    sign_in(page, "admin@example.com")
    page.goto("/operations#statements-h")
    section = page.locator("#statements")
    expect(section).to_contain_text("Sent through the connection EU Transparency Database")
    table = page.locator("#statement-dead-letters")
    expect(table).to_contain_text("content date: The content date field is required.")
    shape = fits(page, "#statement-dead-letters")
    assert not shape["scrolls"], shape
    page.screenshot(path=str(screenshots / "dsa3-operations-statements.png"), full_page=True)
    expect(page.locator('#statement-counts dd[data-state="dead_letter"]')).to_have_text("1")
    page.get_by_role("button", name="Requeue as is").click()
    expect(page.locator("body")).to_contain_text(f"Statement {puids[2]} is queued again")
    expect(page.locator('#statement-counts dd[data-state="dead_letter"]')).to_have_text("0")
    expect(page.locator('#statement-counts dd[data-state="pending"]')).to_have_text("1")
    db.session.rollback()
    submitted = db.session.query(DsaStatement).filter_by(puid=puids[0]).one()
    page.goto(f"/proposals/{submitted.proposal_id}")
    expect(page.locator("#statement-panel")).to_contain_text("In the Transparency Database")
    expect(page.locator("#statement-uuid")).to_contain_text(submitted.tdb_uuid)
    assert page.js_errors == []
