"""A keyboard claim in Chromium says what it did, and breaks no CSP rule (issue 25,
SPEC QUEUE-6): "c" on a row claims it and the status line says "Claimed until …";
"c" again releases it and says "Released …"; the console logs no error."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from app.demo_queue import seed_queue_demo

from .test_console_stories import sign_in


def test_a_keyboard_claim_and_release_are_announced_QUEUE_6(page, world):
    """QUEUE-6: the aria-live status line names what happened; no inline style is applied."""
    seed_queue_demo()
    page.add_init_script("window.cspViolations = []; document.addEventListener('securitypolicyviolation',"
                         " function (e) { window.cspViolations.push(e.violatedDirective + ' ' + e.sample); });")
    sign_in(page, "moderator@example.com")
    page.goto("/queue?sort=most")
    posts = []  # a claim pressed before htmx settled the swapped row once posted plainly and reloaded the page
    page.on("request", lambda r: posts.append(r.headers.get("hx-request")) if r.method == "POST" else None)
    status = page.locator("#notices[aria-live=polite]")
    page.keyboard.press("j")
    page.keyboard.press("c")
    expect(status).to_contain_text(re.compile(r"Claimed until \d\d:\d\d UTC: Account user:5120"))
    expect(page.locator("table[data-keys=rows] tbody tr").first).to_contain_text("Claimed by you")
    page.keyboard.press("c")
    expect(status).to_contain_text("Released Account user:5120")
    expect(page.locator("table[data-keys=rows] tbody tr").first).to_contain_text("Unclaimed")
    assert posts == ["true", "true"]  # both in place, the page never reloaded
    with page.expect_navigation():  # loaded: console.js (deferred) listens for keys only from then on
        page.keyboard.press("Enter")  # the subject's page: "c" claims through its plain form
    expect(page.locator("#claim")).to_contain_text("Unclaimed")
    page.keyboard.press("c")
    expect(page.locator("#notices")).to_contain_text("Claimed until")
    assert page.evaluate("window.cspViolations") == [] and page.js_errors == []
