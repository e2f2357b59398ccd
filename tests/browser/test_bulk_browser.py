"""A bulk action in Debian's Chromium (SPEC BULK-1, BULK-2, BULK-3, BULK-6, BULK-8): a
moderator pastes a list and runs the dry run, submits it; a second reviewer, in a
browser of their own, approves the batch; the page polls the ledger while a real
worker delivers every item, the progress bar reaches the end, polling stops, and the
Undo button posts its form."""

from __future__ import annotations

from playwright.sync_api import expect

from app.extensions import db
from app.models import BulkBatch

from .test_console_stories import sign_in

SUBJECTS = ["post:1003", "post:1004", "post:1005", "post:1006"]


def test_bulk_1_2_3_6_paste_dry_run_approve_as_second_reviewer_watch_progress_and_undo(browser, page, console, world,
                                                                                        platform):
    sign_in(page, "moderator@example.com")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Bulk").click()
    page.get_by_role("link", name="New bulk action").click()
    page.get_by_label("A pasted list").check()
    page.get_by_label("Subject references").fill("\n".join(SUBJECTS))
    page.get_by_label("Reason").fill("One spam network, reported together")
    page.get_by_role("button", name="Dry run").click()

    # BULK-2: the dry run's counts, samples and items; nothing sent
    expect(page.locator('#dry-run-counts [data-outcome="would_act"] strong')).to_have_text("4")
    expect(page.locator("#items tr.item")).to_have_count(4)
    assert platform.state.effects == []
    batch_url = page.url
    page.get_by_role("button", name="Submit 4 items for approval").click()
    expect(page.locator("#batch-state")).to_have_text("submitted")
    expect(page.locator("#items .badge")).to_have_count(4)

    # BULK-3: a second reviewer, in a browser of their own, approves by the batch digest
    reviewer = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console)
    try:
        second = reviewer.new_page()
        second.set_default_timeout(20_000)
        errors: list[str] = []
        second.on("pageerror", lambda error: errors.append(str(error)))
        sign_in(second, "reviewer@example.com")
        second.goto(batch_url)
        expect(second.locator("#drift")).to_contain_text("differs by 0.0 %")
        second.get_by_role("button", name="Approve 4 items").click()

        # BULK-6: the page polls the ledger while the worker delivers; the bar reaches the end
        progress = second.locator("#batch-progress")
        expect(progress).to_have_attribute("max", "4")
        expect(progress).to_have_attribute("value", "4", timeout=60_000)
        live = second.locator("#live")
        expect(live).to_have_attribute("data-finished", "true")
        expect(second.locator('#ledger [data-bucket="applied"] strong')).to_have_text("4")
        assert live.get_attribute("hx-trigger") is None  # polling stopped
        expect(second.locator("#items .badge.state-applied")).to_have_count(4)
        assert len(platform.state.effects) == 4
        db.session.rollback()
        assert db.session.get(BulkBatch, batch_url.rsplit("/", 1)[1]).state == "completed"
        assert errors == [] and page.js_errors == []

        # BULK-8: Undo posts its form (CSRF token included) to the batch's undo route
        second.get_by_label("Why undo").fill("The network was a false positive")
        with second.expect_request(lambda request: request.url.endswith("/undo")) as posted:
            second.get_by_role("button", name="Undo this batch").click()
        request = posted.value
        assert request.method == "POST"
        assert "csrf_token=" in (request.post_data or "") and "reason=The+network" in (request.post_data or "")
        assert "digest=sha256" in (request.post_data or "")
        expect(second.locator("#batch-state")).to_have_text("submitted")
        undo_url = second.url
        assert undo_url != batch_url
    finally:
        reviewer.close()

    # BULK-8: the undo is a batch under four-eyes like the original: neither the original's
    # maker and approver nor the undo's maker approves it; a third reviewer does, and each
    # post is restored once
    third = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console)
    try:
        admin = third.new_page()
        admin.set_default_timeout(20_000)
        sign_in(admin, "admin@example.com")
        admin.goto(undo_url)
        admin.get_by_role("button", name="Approve 4 items").click()
        expect(admin.locator("#batch-progress")).to_have_attribute("value", "4", timeout=60_000)
        expect(admin.locator('#ledger [data-bucket="applied"] strong')).to_have_text("4")
        effects = platform.state.effects
        assert len(effects) == 8 and len({e["idempotency_key"] for e in effects}) == 8
        # each subject the batch acted on is given back once (its opposite effect)
        assert sorted(e["reference"] for e in effects[4:]) == sorted(e["reference"] for e in effects[:4])
        assert {e["effect"] for e in effects[4:]}.isdisjoint({e["effect"] for e in effects[:4]})
    finally:
        third.close()
