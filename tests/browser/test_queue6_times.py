"""QUEUE-6 in Chromium: every absolute time is the `time` helper's element, which
console.js shows in the operator's own zone with the zone named (issue 25: a local
"12/1/2026, 11:15:31 AM" without a zone beside "until 11:34 UTC")."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.demo_queue import BUSY_ACCOUNT, seed_queue_demo

from .test_console_stories import sign_in
from ..web.test_queue_pages import _subject_id


@pytest.fixture
def new_york(browser, console):
    """A page of an operator in New York (EST in December), en-US."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console,
                                  timezone_id="America/New_York", locale="en-US")
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def test_claim_expiry_reads_in_the_operators_zone_with_its_name_QUEUE_6(new_york, world):
    """QUEUE-6: a claim's expiry on the subject page reads as local time with its zone
    ("EST"), the UTC moment kept in the element's datetime; the flash says "HH:MM UTC"."""
    seed_queue_demo()
    sign_in(new_york, "moderator@example.com")
    new_york.goto(f"/queue/{_subject_id(BUSY_ACCOUNT)}")
    new_york.locator("#claim").get_by_role("button", name="Claim").click()
    expect(new_york.get_by_text(re.compile(r"Claimed until \d\d:\d\d UTC: "))).to_be_visible()
    until = new_york.locator("#claim time")
    expect(until).to_have_text(re.compile(r"^[A-Z][a-z]{2} \d{1,2}, \d{4}, \d\d:\d\d:\d\d [AP]M EST$"))
    assert until.get_attribute("datetime").endswith("Z")
