"""An admin changes the DSA settings in the browser (SPEC §7 DSA-1, FOUR-2): the admin
index links the DSA page, which reads in words and fits a phone's screen; the JSON
form proposes a change that only a second admin, entering its digest, puts in force."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from ..builders import set_dsa_settings
from ..web.test_dsa_settings import console_document
from .test_page_overflow import MEASURE, WORD_CAP, sign_in


def test_dsa1_two_admins_change_the_dsa_settings_in_the_browser(browser, console, app, world, screenshots):
    """DSA-1, FOUR-2, REV-3: at 390 px the DSA page shows the settings in force by their
    labels without overflowing; the first admin proposes a longer complaint window in
    the form and lands on the change waiting for a second admin, who cannot be the
    proposer; the second admin approves with the digest and the page shows the new
    window in words."""
    set_dsa_settings(world.installation_id, console_document())
    first = browser.new_context(viewport={"width": 390, "height": 900}, base_url=console)
    second = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console)
    try:
        page = first.new_page()
        page.set_default_timeout(20_000)
        sign_in(page, "admin@example.com")
        page.goto("/admin/")
        page.get_by_role("link", name="DSA settings").click()
        expect(page.locator("#dsa-restrictions")).to_contain_text(
            "Removal of content (restriction of the visibility of content)"
        )
        expect(page.locator("#dsa-complaint-window")).to_have_text("183 days (about 6 months) after the decision")
        page.screenshot(path=str(screenshots / "dsa-settings-390.png"), full_page=True)
        measured = page.evaluate(MEASURE, WORD_CAP)
        assert measured["scrollWidth"] <= measured["width"] and not measured["wide"], measured

        proposed = {**console_document(), "complaint_window_days": 365}
        page.get_by_label("DSA settings (JSON)").fill(json.dumps(proposed, indent=2))
        page.get_by_role("button", name="Propose settings").click()
        expect(page.get_by_text("Waiting for a second admin.")).to_be_visible()
        expect(page.locator("body")).to_contain_text("365 days (about 12 months) after the decision")
        expect(page.get_by_role("button", name="Approve and apply")).to_be_disabled()  # the proposer (FOUR-2)
        change_url = page.url

        other = second.new_page()
        other.set_default_timeout(20_000)
        sign_in(other, "admin2@example.com")
        other.goto(change_url)
        digest = other.locator("#change-digest").inner_text()
        other.locator("input[name=digest]").fill(digest)
        other.get_by_role("button", name="Approve and apply").click()
        other.goto("/admin/dsa")
        expect(other.locator("#dsa-version")).to_contain_text("Version 2 of this installation's DSA settings")
        expect(other.locator("#dsa-complaint-window")).to_have_text("365 days (about 12 months) after the decision")
    finally:
        first.close()
        second.close()
