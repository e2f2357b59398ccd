"""The demo story as a reviewer lives it, in Debian's Chromium (REV-1..6, keyboard):
the post's text and author, the subject's history with the earlier action on the same
account, readable labels, confirmations, and after a reversal the "undone" mark; JSON
panels that never overflow at 1280 px, tables that keep their labels at 390 px."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from playwright.sync_api import expect

from app.demo_platform import DEMO_CONTENT

from ..builders import approve, decide_report, proposal_of, reload
from .conftest import ROOT
from .test_console_stories import sign_in, sign_out

OVERFLOWING_PANELS = """() => Array.from(document.querySelectorAll('pre'))
    .filter(el => el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1)
    .map(el => (el.closest('details') || el).querySelector('summary')?.textContent || el.textContent.slice(0, 40))"""
UNLABELLED_CELLS = """() => Array.from(document.querySelectorAll('table td'))
    .filter(td => !td.classList.contains('empty') && !td.classList.contains('more'))
    .filter(td => { const label = getComputedStyle(td, '::before').content;
                    return !td.dataset.label || label === 'none' || label === '""' || label === 'normal'; })
    .map(td => (td.closest('table').querySelector('caption, th')?.textContent || '')
               + ' / ' + td.textContent.trim().slice(0, 30))"""
WIDE_ELEMENTS = """() => Array.from(document.querySelectorAll('main *'))
    .filter(el => el.getBoundingClientRect().right > 400 && !el.closest('[hidden]'))
    .filter(el => !Array.from(el.children).some(child => child.getBoundingClientRect().right > 400))
    .slice(0, 8).map(el => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right))"""
VISIBLE_HEADERS = """() => Array.from(document.querySelectorAll('table thead'))
    .filter(el => el.offsetParent !== null && getComputedStyle(el).display !== 'none').length"""


def wait_until(predicate, page, timeout_ms=30_000):
    deadline = timeout_ms // 250
    for _ in range(deadline):
        if predicate():
            return
        page.wait_for_timeout(250)
    raise AssertionError("condition not reached in time")


def check_layout(page, screenshots, name):
    """REV-6 at 1280 px: no JSON panel overflows; a screenshot of the page."""
    page.set_viewport_size({"width": 1280, "height": 900})
    for details in page.locator("details.json:not([open])").all():
        details.evaluate("el => el.open = true")
    assert page.evaluate(OVERFLOWING_PANELS) == [], f"{name}: a JSON panel is clipped"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280, name
    page.screenshot(path=str(screenshots / f"story-{name}.png"), full_page=True)


def check_narrow(page, screenshots, name):
    """REV-6 at 390 px: every table cell shows its column's label; nothing scrolls sideways."""
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate(UNLABELLED_CELLS) == [], f"{name}: cells without their label"
    assert page.evaluate(VISIBLE_HEADERS) == 0, name
    width = page.evaluate("document.documentElement.scrollWidth")
    wide = page.evaluate(WIDE_ELEMENTS) if width > 400 else []
    assert width <= 400, f"{name}: horizontal scroll on a phone ({width}px): {wide}"
    page.screenshot(path=str(screenshots / f"story-{name}-narrow.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_the_reviewer_sees_content_history_labels_and_the_undone_mark(page, world, platform, screenshots, app):
    """REV-1..6 in the demo story: evidence, history, labels, confirmations, undone mark, layout."""
    post, earlier_post = DEMO_CONTENT["post:1001"], DEMO_CONTENT["post:1002"]
    assert post["author_reference"] == earlier_post["author_reference"]  # the same account
    earlier = decide_report(world, 1)  # last week: the same account's other post was taken down
    approve(world, earlier)
    wait_until(lambda: reload(earlier).state == "applied", page)

    sign_in(page, "moderator@example.com")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Approval tasks")).to_have_count(0)
    page.goto(f"/reports/{world.report_ids[0]}")
    expect(page.locator(".evidence .content-text")).to_have_text(post["text"])
    decision = page.get_by_label("Decision", exact=True)
    expect(decision).to_have_value("")  # nothing preselected
    decision.select_option("remove_content")
    page.get_by_role("button", name="Record decision").click()
    expect(page.locator("#notices")).to_contain_text("Decision recorded: Remove content.")
    check_layout(page, screenshots, "report-detail")
    check_narrow(page, screenshots, "report-detail")
    sign_out(page)
    expect(page.locator("#notices")).to_contain_text("You are signed out.")

    sign_in(page, "reviewer@example.com")
    page.goto("/tasks")
    expect(page.locator("tbody tr").first).to_contain_text(post["author_name"])
    check_layout(page, screenshots, "approval-queue")
    check_narrow(page, screenshots, "approval-queue")
    proposal = proposal_of(world.report_ids[0])
    page.get_by_role("link", name="Take the content down").click()
    expect(page.locator(".evidence .content-text")).to_have_text(post["text"])
    expect(page.locator(".evidence")).to_contain_text(post["author_name"])
    expect(page.locator(".evidence")).to_contain_text(post["author_reference"])
    expect(page.locator(".evidence .media a")).to_have_attribute("rel", "noopener noreferrer nofollow")
    history = page.locator("section.history")
    expect(history).to_contain_text("R-DEMO02")
    expect(history).to_contain_text("by the same author")
    expect(history.get_by_role("link", name="Take the content down")).to_have_attribute(
        "href", f"/proposals/{earlier.id}"
    )
    expect(history).to_contain_text("Applied on the platform")
    expect(page.locator("#live .state-line")).to_contain_text("Waiting for approval")
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("A second person approves")
    expect(facts).not_to_contain_text("human (assist)")
    expect(page.locator("input[name=decision]:checked")).to_have_count(0)
    check_layout(page, screenshots, "proposal-review")
    check_narrow(page, screenshots, "proposal-review")

    page.get_by_role("button", name="Copy digest").click()
    expect(page.get_by_role("button", name="Copied")).to_be_visible()
    page.keyboard.press("d")  # the key that focuses the digest field
    expect(page.get_by_label("Payload digest you reviewed")).to_be_focused()
    page.keyboard.type(proposal.payload_digest)
    page.get_by_label("Approve").check()
    page.get_by_role("button", name="Record decision").click()
    # the confirmation shows until the delivery panel says it ended (QUEUE-6): a worker
    # quicker than the page may end it first (CI: the notice gone, the action applied)
    approved = page.locator("#notices").get_by_text("You approved “Take the content down”")
    expect(approved.or_(page.locator('#live[data-terminal="true"]')).first).to_be_visible()
    expect(page.locator('#live[data-terminal="true"] .badge.state-applied')).to_be_visible(timeout=30_000)
    expect(approved).to_have_count(0)  # gone once applied
    assert platform.state.content["post:1001"] == "removed"
    check_layout(page, screenshots, "proposal-detail")
    sign_out(page)

    # The author appeals; a second reviewer reverses; an admin approves the restore.
    response = page.request.post(  # the platform forwards the appeal through the API
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        data={"report_external_id": "demo-report-1", "statement": "It was a joke between friends."},
    )
    assert response.status == 201, response.text()
    appeal_id = response.json()["appeal_id"]
    sign_in(page, "reviewer2@example.com")
    page.goto(f"/appeals/{appeal_id}")
    expect(page.locator("input[name=outcome]:checked")).to_have_count(0)
    page.get_by_label("Reversed: undo the enforcement").check()
    page.get_by_role("button", name="Record outcome").click()
    expect(page.locator("#notices")).to_contain_text("Appeal outcome recorded: Reversed")
    sign_out(page)
    sign_in(page, "admin@example.com")
    restore = proposal_of(world.report_ids[0])
    page.goto(f"/proposals/{restore.id}")
    page.get_by_label("Payload digest you reviewed").fill(page.locator("#payload-digest").inner_text())
    page.get_by_label("Approve").check()
    page.get_by_role("button", name="Record decision").click()
    expect(page.locator('#live[data-terminal="true"] .badge.state-applied')).to_be_visible(timeout=30_000)
    assert platform.state.content["post:1001"] == "visible"

    page.goto(f"/proposals/{proposal.id}")
    state = page.locator("#live .state-line")
    expect(state.locator(".badge.state-undone")).to_have_text("Undone")
    expect(state.get_by_role("link", name="appeal correction")).to_have_attribute("href", f"/appeals/{appeal_id}")
    check_layout(page, screenshots, "proposal-undone")
    page.goto("/proposals")
    expect(
        page.locator("tbody tr", has=page.locator(f'a[href="/proposals/{proposal.id}"]')).locator(".state-undone")
    ).to_be_visible()
    check_layout(page, screenshots, "proposals-list")
    check_narrow(page, screenshots, "proposals-list")
    page.goto(f"/appeals/{appeal_id}")
    expect(page.locator("dl.facts").first).to_contain_text("Undone")
    check_layout(page, screenshots, "appeal-detail")
    check_narrow(page, screenshots, "appeal-detail")
    page.goto("/admin/labels")
    check_layout(page, screenshots, "admin-labels")
    check_narrow(page, screenshots, "admin-labels")
    assert page.js_errors == []
    if os.environ.get("UPDATE_README_PICTURE"):  # README's picture: the reviewed action, applied
        picture = Path(ROOT) / "static" / "docs" / "proposal-detail.png"
        shutil.copyfile(screenshots / "story-proposal-detail.png", picture)


def test_keys_move_open_and_focus(page, world, platform):
    """Keyboard: j/k move through a list, Enter opens, / focuses the filter, ? shows the keys."""
    first, second = decide_report(world, 0), decide_report(world, 2)
    sign_in(page, "reviewer@example.com")
    page.goto("/proposals")
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#keys-help")).to_be_hidden()
    page.keyboard.press("j")
    expect(page.locator("tr.kb-current")).to_have_count(1)
    expect(page.locator("tr.kb-current a").first).to_have_attribute("href", f"/proposals/{second.id}")  # newest first
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(page.locator("tr.kb-current a").first).to_have_attribute("href", f"/proposals/{second.id}")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/proposals/{first.id}")
    page.go_back()
    page.keyboard.press("/")
    expect(page.locator("form[data-keys=filter] select[name=state]")).to_be_focused()
    page.keyboard.type("j")  # typing in a field is typing, not a shortcut
    expect(page.locator("tr.kb-current")).to_have_count(0)
    assert page.js_errors == []


def test_pages_work_without_javascript(browser, console, world, platform):
    """Nothing of the keyboard or copy buttons is needed: without JavaScript the pages
    show everything, the copy button stays hidden, and a decision is recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console, java_script_enabled=False)
    page = context.new_page()
    try:
        proposal = decide_report(world)
        sign_in(page, "reviewer@example.com")
        page.goto(f"/proposals/{proposal.id}")
        expect(page.locator(".evidence .content-text")).to_have_text(DEMO_CONTENT["post:1001"]["text"])
        expect(page.get_by_role("button", name="Copy digest")).to_be_hidden()
        expect(page.locator("#keys-help")).to_be_hidden()
        page.get_by_label("Payload digest you reviewed").fill(proposal.payload_digest)
        page.get_by_label("Reject").check()
        page.get_by_role("button", name="Record decision").click()
        expect(page.locator("#notices")).to_contain_text("You rejected")
        assert reload(proposal).state == "rejected"
    finally:
        context.close()
