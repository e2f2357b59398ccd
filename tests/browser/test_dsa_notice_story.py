"""A restriction's DSA notice on its page in Debian's Chromium (DSA-4): the notice
panel names the language and the state of its notify_user action, the text opens
from a collapsed <details>, and the notice's page links back."""

from __future__ import annotations

from playwright.sync_api import expect

from app.extensions import db
from app.models import ActionProposal
from tests.builders import set_dsa_settings
from tests.dsa_notice_steps import applied_removal, queued_notice

from .test_console_stories import sign_in
from .test_review_story import wait_until


def test_dsa4_the_restriction_page_shows_the_notice_the_user_received(page, world, platform, screenshots):
    """DSA-4: after the takedown applied, its notice is delivered by the worker; the
    page shows it in German with its state, the text collapsed until opened."""
    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform, language="de")
    notice_id = queued_notice(removal).id  # queued when the takedown applied
    db.session.rollback()
    # the console's worker process delivers it (it may still be starting on a busy machine)
    wait_until(lambda: len(platform.state.notices) == 1, page, timeout_ms=90_000)

    sign_in(page, "reviewer@example.com")
    page.goto(f"/proposals/{removal.id}")
    panel = page.locator("#dsa-notice")
    expect(panel).to_contain_text("German (Deutsch)")
    expect(panel.locator("#dsa-notice-status")).to_contain_text("Applied on the platform")
    text = page.locator("#dsa-notice-text pre")
    expect(text).to_be_hidden()
    page.locator("#dsa-notice-text summary").click()
    expect(text).to_be_visible()
    expect(text).to_contain_text("Entfernung von Inhalten")
    expect(text).to_contain_text("Artikel 21")
    page.screenshot(path=str(screenshots / "dsa-notice.png"), full_page=True)
    assert page.js_errors == [], ("restriction page", page.js_errors)

    page.locator(f'#dsa-notice-status a[href="/proposals/{notice_id}"]').click()
    expect(page.locator("#dsa-notice-of")).to_be_visible()
    db.session.rollback()
    assert db.session.get(ActionProposal, notice_id).state == "applied"
