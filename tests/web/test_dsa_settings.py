"""DSA settings edited as a four-eyes change (SPEC §7 DSA-1, FOUR-4): the document
proposed on /admin/dsa (or by ``flask dsa-settings``) applies only when a second admin
approves it by its digest, as a new settings version; a bad document is refused with
every problem in words and stores nothing; the page shows every value by its label;
a component's page says which DSA restriction its action is."""

from __future__ import annotations

import copy
import html
import json
import re

import pytest
from sqlalchemy import func, select

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain.digests import json_digest
from app.domain.dsa_settings import settings_from_json, settings_to_json
from app.extensions import db
from app.models import ComponentDefinition, ConfigChange, DsaSettingsVersion
from app.services.admin.changes import change_digest

from ..builders import approve_in_console, approve_pending, login, pending_changes, set_dsa_settings
from .test_admin import admin, assert_refused, audits, post, text


def console_document() -> dict:
    """The demo's settings as an admin of the test world can propose them: no notice
    component (affected users get no notice from the console; the demo seed's test
    shows the notify_user one), and statements go to the world's connection."""
    document = copy.deepcopy(DEMO_DSA_SETTINGS)
    document.update(notice_component=None, tdb_connection="demo-platform-api")
    return document


def versions() -> list[DsaSettingsVersion]:
    db.session.rollback()
    return list(db.session.scalars(select(DsaSettingsVersion).order_by(DsaSettingsVersion.version)))


def propose(client, csrf, document) -> object:
    return post(client, "/admin/dsa", csrf, settings=document if isinstance(document, str) else json.dumps(document))


def outside_small_print(page: str) -> str:
    """The page without its small print, the JSON form and the allowed-values list:
    what people read (REV-3)."""
    page = re.sub(r"<small class=\"code\">.*?</small>", "", page, flags=re.S)
    page = re.sub(r"<textarea.*?</textarea>", "", page, flags=re.S)
    return re.sub(r"<details id=\"dsa-allowed-values\">.*?</details>", "", page, flags=re.S)


def test_dsa1_settings_apply_only_when_a_second_admin_approves_them(app, client, world):
    """DSA-1, FOUR-2: one admin's DSA settings are stored as a pending change whose
    digest binds the document, shown in words on the change page and under "Waiting
    for a second admin"; its proposer cannot approve it; a second admin's approval
    writes version 1 (the normalised document and its digest, audited)."""
    csrf = admin(client)
    page = text(client.get("/admin/dsa"))
    assert "No DSA settings were approved" in page and "Off: no statements of reasons are made" in page
    response = propose(client, csrf, console_document())
    [change] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    normalised = settings_to_json(settings_from_json(console_document()))
    assert change.kind == "dsa.settings" and change.content == {"settings": normalised} and versions() == []
    assert change.digest == change_digest(change.id, world.installation_id, change.kind, None, change.content)
    assert change.summary == "DSA settings: on, 2 restricting components, 2 decision codes"
    shown = html.unescape(text(client.get(f"/admin/changes/{change.id}")))
    assert "Waiting for a second admin." in shown
    assert "takedown: Removal of content (restriction of the visibility of content)" in shown
    assert "Scams and/or fraud" in shown and "Demo platform API" not in shown  # the change names the slug
    page = text(client.get("/admin/dsa"))
    assert "Waiting for a second admin" in page and f"/admin/changes/{change.id}" in page

    alone = approve_in_console(app, change.id, "admin@example.com")
    assert alone.status_code == 403 and "maker_checker_violation" in text(alone) and versions() == []
    assert approve_pending(app) == [change.id]
    [version] = versions()
    assert (version.version, version.change_id) == (1, change.id)
    assert version.settings == normalised and version.settings_digest == json_digest(normalised)
    [audit] = audits("dsa.settings_set")
    assert json.loads(audit.details_json)["config_change_id"] == change.id
    assert "Version 1 of this installation" in text(client.get("/admin/dsa"))


def test_dsa1_the_page_shows_every_value_by_its_label(app, client, world):
    """DSA-1, REV-3: the settings in force read in words — restriction kinds and types,
    categories, grounds, keywords, content types, languages, the territorial scope, the
    complaint window and the Transparency Database connection by name; the API's codes
    only in small print."""
    set_dsa_settings(world.installation_id, console_document())
    csrf = admin(client)
    page = html.unescape(text(client.get("/admin/dsa")))
    for words in (
        "On: restricting actions get statements of reasons",
        "Removal of content (restriction of the visibility of content)",
        "Suspension of the account (restriction of the account)",
        "Illegal or harmful speech",
        "Scams and/or fraud",
        "Content incompatible with terms and conditions (not illegal)",
        "Keywords: Cyber harassment",
        "Community guidelines, section 3 (harassment)",
        "Post: Text",
        "183 days (about 6 months) after the decision",
        "English, German (default: English)",
        "Every EU country",
        "Demo platform API",
        "None: affected users get no notice from the console",
    ):
        assert words in page, words
    assert "Take the content down" in page and "Remove content" in page  # the installation's labels
    readable = outside_small_print(page)
    for code in ("DECISION_VISIBILITY_", "DECISION_ACCOUNT_", "STATEMENT_CATEGORY_", "DECISION_GROUND_",
                 "CONTENT_TYPE_", "KEYWORD_", "demo-platform-api"):
        assert code not in readable, code
    assert "STATEMENT_CATEGORY_SCAMS_AND_FRAUD" in page  # in small print
    assert text(client.get("/admin/")).count('href="/admin/dsa"') == 2  # the admin index and its menu
    assert csrf


def _document(**changes) -> dict:
    document = console_document()
    document.update(changes)
    return document


@pytest.mark.parametrize(
    ("document", "problems"),
    [
        ("{not json", ["not valid JSON"]),
        (
            _document(restrictions={
                "nowhere": {"restriction": "account", "type": "DECISION_VISIBILITY_CONTENT_REMOVED"},
            }),
            ["restrictions.nowhere.type: DECISION_VISIBILITY_CONTENT_REMOVED is not a type of account restriction.",
             "restrictions.nowhere: no component has this slug."],
        ),
        (
            _document(notice_component="notify_nobody", tdb_connection="tdb", default_language="de",
                      notice_languages=["en"]),
            ["notice_component: no component has the slug notify_nobody.", "default_language: must be one of",
             "tdb_connection: no connection has the slug tdb."],
        ),
        (
            _document(complaint_window_days=30, territorial_scope=["US"]),
            ["complaint_window_days: 30 is less than the minimum of 183",
             "territorial_scope.0: 'US' is not one of the 30 allowed values"],
        ),
        (
            _document(decisions={"remove_content": {"category": "HATE", "ground": "DECISION_GROUND_ILLEGAL_CONTENT",
                                                    "reference": "StGB §130"}}),
            ["decisions.remove_content.category: 'HATE' is not one of the 16 allowed values"],
        ),
    ],
)
def test_dsa1_a_bad_settings_document_is_refused_with_every_problem_and_nothing_stored(
    app, client, world, document, problems
):
    """DSA-1: a document that is not JSON, names a component or connection the
    installation does not have, a type of another kind of restriction, a complaint
    window under six months or a value outside the API's lists: 400
    ``dsa_settings_invalid`` naming every problem at once in words (long lists of
    allowed values are not repeated); no change, no version."""
    csrf = admin(client)
    before = db.session.scalar(select(func.count()).select_from(ConfigChange))
    page = html.unescape(assert_refused(propose(client, csrf, document), 400, "dsa_settings_invalid"))
    for problem in problems:
        assert problem in page, page[:3000]
    assert "STATEMENT_CATEGORY_ANIMAL_WELFARE'," not in page  # the list is not repeated in the message
    assert pending_changes() == [] and versions() == []
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == before


def test_dsa1_the_settings_in_force_again_store_nothing_and_only_admins_propose(app, client, world):
    """DSA-1: proposing the settings in force is "nothing to change"; an auditor sees
    the page read-only and is refused (403) a proposal."""
    set_dsa_settings(world.installation_id, console_document())
    csrf = admin(client)
    response = propose(client, csrf, console_document())
    assert response.status_code == 303 and response.headers["Location"].endswith("/admin/dsa")
    assert pending_changes() == []
    auditor = app.test_client()
    token = login(auditor, "auditor@example.com")
    page = text(auditor.get("/admin/dsa"))
    assert "Read-only" in page and 'action="/admin/dsa"' not in page and "Removal of content" in page
    assert propose(auditor, token, _document(enabled=False)).status_code == 403 and pending_changes() == []


def test_dsa1_the_cli_proposes_the_same_change(app, runner, world, tmp_path):
    """DSA-1, FOUR-4: ``flask dsa-settings --file`` stores the same pending change (the
    CLI is no way round a second admin); a bad file exits 1 with the code and every
    problem; an unreadable file exits 1."""
    path = tmp_path / "dsa.json"
    path.write_text(json.dumps(console_document()))
    args = ["dsa-settings", "--file", str(path), "--installation", "demo", "--proposer", "admin@example.com"]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    [change] = pending_changes()
    assert change.kind == "dsa.settings" and change.digest in result.output and versions() == []
    path.write_text(json.dumps(_document(notice_component="notify_nobody", tdb_connection="tdb")))
    bad = runner.invoke(args=args)
    assert bad.exit_code == 1 and "dsa_settings_invalid" in bad.output
    assert "no component has the slug notify_nobody" in bad.output and "no connection has the slug tdb" in bad.output
    missing = runner.invoke(args=["dsa-settings", "--file", str(tmp_path / "none.json"), "--installation", "demo",
                                  "--proposer", "admin@example.com"])
    assert missing.exit_code == 1 and "dsa_settings_unreadable" in missing.output
    assert len(pending_changes()) == 1
    assert approve_pending(app) == [change.id] and len(versions()) == 1


def test_dsa1_a_components_page_says_which_restriction_its_action_is(app, client, world):
    """DSA-1: a component's admin page says which DSA restriction its action is under
    the settings in force, or that it is not one (DSA off, or not declared)."""
    admin(client)
    ids = dict(db.session.execute(select(ComponentDefinition.slug, ComponentDefinition.id)).all())
    takedown, restore = f"/admin/components/{ids['takedown']}", f"/admin/components/{ids['restore']}"
    assert "Not a restriction under the DSA" in text(client.get(takedown))  # DSA off
    set_dsa_settings(world.installation_id, console_document())
    page = text(client.get(takedown))
    assert re.search(r'id="dsa-restriction"><a href="/admin/dsa">Removal of content \(restriction of the '
                     r'visibility of content\)</a>', page), page
    assert "Suspension of the account" in text(client.get(f"/admin/components/{ids['suspend_account']}"))
    assert "Not a restriction under the DSA" in text(client.get(restore))
    set_dsa_settings(world.installation_id, _document(enabled=False))
    assert "Not a restriction under the DSA" in text(client.get(takedown))


def test_dsa1_the_demo_seed_puts_the_demo_settings_in_force(app, client, platform):
    """DSA-1: ``flask demo``'s seed writes the demo's DSA settings as version 1, as the
    system (named in its ``installation.seeded`` audit row), so the demo shows DSA on;
    a test world (seeded without them) starts with DSA off."""
    from app.demo import seed_demo
    from app.models import Installation
    from app.services.dsa.settings import current_settings

    from ..builders import make_world

    seed_demo(platform.url)
    iid = db.session.scalar(select(Installation.id).where(Installation.slug == "demo"))
    [version] = versions()
    settings = current_settings(db.session, iid)
    assert (version.installation_id, version.version, version.change_id) == (iid, 1, None)
    assert settings == settings_from_json(DEMO_DSA_SETTINGS) and settings.notice_component == "notify_user"
    [seeded] = audits("installation.seeded")
    assert json.loads(seeded.details_json)["dsa_settings_version_id"] == version.id
    admin(client)
    page = html.unescape(text(client.get("/admin/dsa")))
    assert "On: restricting actions get statements of reasons" in page and "Tell the user why (statement of reasons)" in page
    other = make_world(platform.url, slug="other")
    assert not current_settings(db.session, other.installation_id).enabled and len(versions()) == 1
