"""Every main page of the demo fits its screen (issue 25, item 4; REV-6): at 1280 and
390 px, Chromium lays each page out, a screenshot goes to ARTIFACTS_DIR, and the
layout is measured: nothing reaches past the viewport outside a deliberate scroll
container, and no table cell is narrower than its longest word (a word of more than
WORD_CAP characters, such as a digest or an at-uri, counts as its first WORD_CAP
characters: it may break, but not one character per line)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from app.demo import DEMO_PASSWORD

from ..builders import approve, decide_report, pending_changes, proposal_of, run_worker
from .conftest import pass_second_factor

WIDTHS = (1280, 390)
WORD_CAP = 16

# What the page measures: elements past the right edge, and cells narrower than a word.
MEASURE = """(cap) => {
  const width = document.documentElement.clientWidth;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
    + (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const scrolls = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX;
      if (x === 'auto' || x === 'scroll' || x === 'hidden' || x === 'clip') return true;
    }
    return false;
  };
  const shown = (el) => { const s = getComputedStyle(el); return s.display !== 'none' && s.visibility !== 'hidden'; };
  const wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.visually-hidden, .skip, [hidden]') || !shown(el)) continue;
    const r = el.getBoundingClientRect();
    if ((r.width || r.height) && r.right > width + 1 && !scrolls(el)) {
      wide.push(name(el) + ' right ' + Math.round(r.right));
    }
  }
  const canvas = document.createElement('canvas').getContext('2d');
  const narrow = [];
  for (const cell of document.querySelectorAll('td, th')) {
    if (!shown(cell) || cell.closest('[hidden]') || !cell.getClientRects().length) continue;
    const style = getComputedStyle(cell);
    const room = cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let longest = 0, word = '';
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const owner = node.parentElement;
      if (!owner || owner.closest('.visually-hidden') || !shown(owner)) continue;
      if (getComputedStyle(owner).whiteSpace === 'nowrap' && getComputedStyle(owner).overflow === 'hidden') continue;
      const f = getComputedStyle(owner);
      canvas.font = f.fontStyle + ' ' + f.fontWeight + ' ' + f.fontSize + ' ' + f.fontFamily;
      for (const w of node.textContent.split(/\\s+/)) {
        const piece = w.slice(0, cap), measured = canvas.measureText(piece).width;
        if (measured > longest) { longest = measured; word = piece; }
      }
    }
    if (longest > room + 1) {
      narrow.push(name(cell) + ' "' + word + '" ' + Math.round(longest) + ' px in ' + Math.round(room));
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, innerWidth: window.innerWidth, wide, narrow};
}"""


def sign_in(page, email: str) -> None:
    page.goto("/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    pass_second_factor(page, email)
    page.wait_for_url(re.compile(r"^(?!.*/login).*$"))


def demo_case(app, world) -> dict[str, str]:
    """The demo with something on every page: a takedown approved (the worker applies
    it), an appeal on it, a budget and a pending change to it; the ids for the URLs."""
    from app.extensions import db
    from app.models import Budget

    takedown = decide_report(world)
    approve(world, takedown)
    run_worker(app)
    decide_report(world, 1)
    client = app.test_client()
    appeal = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "external_id": "appeal-1", "statement": "My post was satire."},
    )
    assert appeal.status_code == 201, appeal.get_data(as_text=True)
    from ..builders import approve_in_console, login

    token = login(client, "admin@example.com")
    fields = {"scope_type": "component", "scope_id": world.components["takedown"]}
    client.post("/admin/budgets", data={**fields, "limit_amount": "4", "window_seconds": "3600", "csrf_token": token})
    [change] = pending_changes()
    assert approve_in_console(app, change.id).status_code == 303
    db.session.rollback()
    budget_id = db.session.scalar(db.select(Budget.id))
    raised = client.post(f"/admin/budgets/{budget_id}/limit", data={"limit_amount": "40", "csrf_token": token})
    assert raised.status_code == 303, raised.get_data(as_text=True)[:2000]
    [change] = pending_changes()
    return {
        "report": world.report_ids[0],
        "proposal": takedown.id,
        "appeal": appeal.get_json()["appeal_id"],
        "change": change.id,
    }


def pages(ids: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, who, path) of each main page."""
    return [
        ("queue", "moderator", "/queue"),
        ("reports", "moderator", "/reports"),
        ("report", "moderator", f"/reports/{ids['report']}"),
        ("proposals", "reviewer", "/proposals"),
        ("proposal", "reviewer", f"/proposals/{ids['proposal']}"),
        ("tasks", "reviewer", "/tasks"),
        ("appeals", "reviewer", "/appeals"),
        ("appeal", "reviewer", f"/appeals/{ids['appeal']}"),
        ("bulk", "moderator", "/bulk"),
        ("operations", "admin", "/operations"),
        ("transparency", "admin", "/transparency?from=2026-11-01&to=2026-12-01"),  # DSA-6
        ("admin", "admin", "/admin/"),
        ("change", "admin2", f"/admin/changes/{ids['change']}"),
        ("budgets", "admin", "/admin/budgets"),
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_main_page_fits_its_screen(browser, console, app, world, platform, screenshots, width):
    """REV-6 (issue 25, item 4): at `width` px, no page is wider than the viewport, no
    element reaches past its right edge outside a scroll container, and no table cell
    is narrower than its longest word; each page is saved as a screenshot."""
    ids = demo_case(app, world)
    assert proposal_of(world.report_ids[0]).id == ids["proposal"]
    found: dict[str, dict] = {}
    contexts = {}
    try:
        for name, who, path in pages(ids):
            if who not in contexts:
                contexts[who] = browser.new_context(viewport={"width": width, "height": 900}, base_url=console)
                page = contexts[who].new_page()
                page.set_default_timeout(20_000)
                sign_in(page, f"{who}@example.com")
            page = contexts[who].pages[0]
            page.goto(path)
            expect(page.locator("main h1").first).to_be_visible()
            page.screenshot(path=str(screenshots / f"overflow-{name}-{width}.png"), full_page=True)
            measured = page.evaluate(MEASURE, WORD_CAP)
            if measured["scrollWidth"] > measured["width"] or measured["wide"] or measured["narrow"]:
                found[name] = measured
    finally:
        for context in contexts.values():
            context.close()
    assert found == {}, json.dumps(found, indent=1)


def test_budget_form_and_copy_digest_in_the_browser(browser, console, app, world, platform):
    """FOUR-4, FOUR-2 (issue 25): the budget form's scope select offers only the ids of
    the chosen scope type; the change page's "Copy digest" copies it, or selects it for
    Ctrl+C where the clipboard is refused."""
    ids = demo_case(app, world)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console)
    try:
        page = context.new_page()
        page.set_default_timeout(20_000)
        sign_in(page, "admin@example.com")
        page.goto("/admin/budgets")
        for kind in ("queue", "workflow", "component"):
            page.get_by_label("Scope type").select_option(kind)
            offered = page.locator("#scope_id option:not([disabled])")
            kinds = offered.evaluate_all("(options) => options.map((o) => o.dataset.scopeType)")
            assert kinds and set(kinds) == {kind}, (kind, kinds)
            chosen = page.locator("#scope_id").evaluate("(s) => s.options[s.selectedIndex].dataset.scopeType")
            assert chosen == kind
        page.get_by_role("button", name="Sign out").click()
        sign_in(page, "admin2@example.com")
        page.goto(f"/admin/changes/{ids['change']}")
        digest = page.locator("#change-digest").inner_text()
        button = page.locator('button.copy[data-copy="#change-digest"]')
        button.click()
        expect(button).to_have_text(re.compile(r"^(Copied|Selected: press Ctrl\+C)$"))
        assert page.evaluate("() => window.getSelection().toString().trim()") == digest
    finally:
        context.close()
