"""The restriction's page shows its DSA notice to the affected user (SPEC DSA-4):
language, subject, the text collapsed, its notify_user proposal and state; the
notice's page links back to the restriction."""

from __future__ import annotations

import html

from app.extensions import db
from app.models import ActionProposal
from tests.builders import login, run_worker, set_dsa_settings
from tests.dsa_notice_steps import applied_removal, queued_notice


def test_dsa4_the_restriction_page_shows_its_notice_and_state(app, client, world, platform):
    """DSA-4: language in words, subject, the text in a closed <details>, a link to the
    notice's own proposal with its state once delivered; the notice page links back."""
    set_dsa_settings(world.installation_id)
    removal = applied_removal(world, platform, language="de")
    notice_id = queued_notice(removal).id  # queued when the takedown applied
    db.session.rollback()
    run_worker(app)
    notice = db.session.get(ActionProposal, notice_id)
    login(client, "reviewer@example.com")
    page = html.unescape(client.get(f"/proposals/{removal.id}").get_data(as_text=True))
    assert 'id="dsa-notice"' in page and "German (Deutsch)" in page
    assert f'href="/proposals/{notice_id}"' in page
    assert "Applied on the platform" in page  # the notice's state, in words (REV-3)
    assert notice.payload["subject"] in page
    assert '<details id="dsa-notice-text">' in page  # collapsed
    assert notice.payload["text"].splitlines()[0] in page
    notice_page = client.get(f"/proposals/{notice_id}").get_data(as_text=True)
    assert 'id="dsa-notice-of"' in notice_page and f'href="/proposals/{removal.id}"' in notice_page


def test_dsa4_a_restriction_without_a_statement_shows_no_notice(app, client, world, platform):
    """DSA-4: with DSA off there is no statement, and the page shows no notice panel."""
    removal = applied_removal(world, platform)
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{removal.id}").get_data(as_text=True)
    assert 'id="dsa-notice"' not in page and 'id="dsa-notice-of"' not in page
