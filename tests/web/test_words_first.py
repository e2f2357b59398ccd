"""Pages say things in words first (issue 25, REV-3): no label followed by its
code ("Open open"), refusals that begin with the message, the config-change page's
copy button, hint and confirmations, a budget form whose scope fits its type, a decided
report that shows its decision, and an appeal's follow-up counted for its viewer."""

from __future__ import annotations

import html
import re

from sqlalchemy import select

from app.extensions import db
from app.models import Budget

from ..builders import approve_in_console, decide_report, login, logout, pending_changes, proposal_of, run_worker
from .test_admin import admin, post, snapshot, text


def visible(page: str) -> str:
    """The page's text as a person reads it: no tags, no title attributes, one space."""
    body = re.sub(r"<(script|style|head)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def doubled(page: str) -> list[str]:
    """Words printed twice in a row ("Open open", "completed completed")."""
    return [m.group(0) for m in re.finditer(r"\b([A-Za-z_]{3,})\s+\1\b", visible(page), flags=re.I)]


def add_budget(client, csrf: str, scope_id: str, scope_type: str = "component"):
    """Propose a budget of 4 an hour through the admin form; the answer."""
    fields = {"scope_type": scope_type, "scope_id": scope_id, "limit_amount": "4", "window_seconds": "3600"}
    return post(client, "/admin/budgets", csrf, **fields)


def reverse(client, appeal_id: str, token: str):
    """Record "Reversed" on the appeal from the console; the answer."""
    fields = {"outcome": "reversed", "rationale": "Satire is allowed.", "csrf_token": token}
    return client.post(f"/appeals/{appeal_id}/decision", data=fields)


def appeal_reversed(app, client, world) -> str:
    """The first report's takedown applied, appealed and reversed by reviewer2; the appeal id."""
    report_id = world.report_ids[0]
    proposal = decide_report(world)
    token = login(client, "reviewer@example.com")
    fields = {"decision": "approved", "payload_digest": proposal.payload_digest, "idempotency_key": "k1"}
    client.post(f"/proposals/{proposal.id}/decision", data={**fields, "csrf_token": token})
    run_worker(app)
    logout(client, token)
    response = client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": "demo-report-1", "external_id": "appeal-1", "statement": "Satire."},
    )
    assert response.status_code == 201 and proposal_of(report_id) is not None
    return response.get_json()["appeal_id"]


# -- labels without their codes (REV-3) ----------------------------------------


def test_no_label_is_followed_by_its_code_REV_3(app, client, world, platform):
    """REV-3: states, decisions, outcomes and actions read as words; the code is
    in the tooltip (title), never printed after the label: no "Open open", "Closed
    closed", "Undone applied", "completion completed completed" on any page."""
    appeal_id = appeal_reversed(app, client, world)
    token = login(client, "reviewer2@example.com")
    reverse(client, appeal_id, token)
    logout(client, token)
    login(client, "admin@example.com")
    proposal = proposal_of(world.report_ids[0])
    urls = [
        "/reports", f"/reports/{world.report_ids[0]}", f"/reports/{world.report_ids[1]}", "/proposals",
        f"/proposals/{proposal.id}", "/tasks", "/appeals", f"/appeals/{appeal_id}", "/operations", "/bulk",
    ]
    for url in urls:
        page = text(client.get(url))
        assert doubled(page) == [], (url, doubled(page))
        assert not re.search(r'</span>\s*<small class="code">', page), url  # no code after a badge or label
    report = text(client.get(f"/reports/{world.report_ids[0]}"))
    assert '<span class="coded" title="remove_content">Remove content</span>' in report
    assert re.search(r'<span class="badge state-\w+" title="state: \w+">[^<]+</span>', report)


# -- refusals in words first (REV-3) --------------------------------------------------


def test_error_banners_begin_with_words_and_end_with_the_code_REV_3(app, client, world):
    """REV-3: a refusal's banner starts with its message; the code follows in small
    print (`config_change_digest_mismatch —` no longer leads); no row changes."""
    csrf = admin(client)
    add_budget(client, csrf, world.components["takedown"])
    [change] = pending_changes()
    second = app.test_client()
    with app.app_context():
        token = login(second, "admin2@example.com")
        before = snapshot()
        wrong = post(second, f"/admin/changes/{change.id}/approve", token, digest="sha256:" + "f" * 64)
        assert wrong.status_code == 409 and snapshot() == before
    banner = re.search(r'<div class="error" role="alert"[^>]*>(.*?)</div>', text(wrong), flags=re.S).group(1)
    assert visible(banner).strip().startswith("The digest does not match this change.")
    assert visible(banner).strip().endswith("config_change_digest_mismatch")
    assert '<small class="code">config_change_digest_mismatch</small>' in banner
    missing = text(client.get("/proposals/no-such-proposal"))
    banner = re.search(r'<div class="error" role="alert"[^>]*>(.*?)</div>', missing, flags=re.S).group(1)
    assert not visible(banner).strip().startswith("not_found") and '<small class="code">not_found</small>' in banner


# -- the config-change page and the budget form -----------------------------------------


def test_change_page_copies_the_digest_and_names_no_spec_id(app, client, world):
    """FOUR-2 (issue 25): the digest has a copy button (static JS, clipboard with a
    select-text fallback); the digest hint names no spec id like "(FOUR-2)"."""
    csrf = admin(client)
    add_budget(client, csrf, world.components["takedown"])
    [change] = pending_changes()
    second = app.test_client()
    with app.app_context():
        login(second, "admin2@example.com")
        page = text(second.get(f"/admin/changes/{change.id}"))
    assert '<button type="button" class="copy" data-copy="#change-digest" hidden>Copy digest</button>' in page
    assert "(FOUR-2)" not in page and not re.search(r"\([A-Z]{2,5}-\d+\)", visible(page))
    script = text(client.get("/static/console.js"))
    assert "navigator.clipboard" in script and "selectNodeContents" in script


def test_adding_a_budget_and_approving_a_change_are_confirmed_REV_5(app, client, world):
    """REV-5, FOUR-4: adding a budget says it waits for a second admin; approving the
    change says it applied."""
    csrf = admin(client)
    response = add_budget(client, csrf, world.components["takedown"])
    assert response.status_code == 303
    page = text(client.get(response.headers["Location"]))
    assert 'class="notice notice-ok"' in page and "Budget stored" in page and "second admin" in page
    [change] = pending_changes()
    approved = approve_in_console(app, change.id)
    assert approved.status_code == 303
    second = app.test_client()
    with app.app_context():  # the approving admin's next page carries the confirmation
        token = login(second, "admin2@example.com")
        post(client, "/admin/budgets/" + db.session.scalar(select(Budget.id)) + "/limit", csrf, limit_amount="5")
        [change] = pending_changes()
        page = second.get(f"/admin/changes/{change.id}").get_data(as_text=True)
        digest = re.search(r'id="change-digest">(sha256:[0-9a-f]{64})<', page).group(1)
        done = post(second, f"/admin/changes/{change.id}/approve", token, digest=digest)
        assert done.status_code == 303
        page = text(second.get(done.headers["Location"]))
    assert 'class="notice notice-ok"' in page and "Change approved and applied" in page


def test_budget_scope_must_fit_its_type(app, client, world):
    """FOUR-4 (issue 25): a queue budget naming a component version is refused 400
    ``budget_scope_invalid`` before anything is stored; each scope option says its type
    so the form's script shows only the options of the chosen type."""
    csrf = admin(client)
    before = snapshot()
    refused = add_budget(client, csrf, world.components["takedown"], scope_type="queue")
    assert refused.status_code == 400 and "budget_scope_invalid" in text(refused)
    assert snapshot() == before and pending_changes() == []
    page = text(client.get("/admin/budgets"))
    assert f'<option data-scope-type="component" value="{world.components["takedown"]}"' in page
    assert 'data-scope-for="scope_type"' in page


# -- a decided report, a reversed appeal ------------------------------------------------


def test_a_decided_report_shows_its_decision_not_the_form(app, client, world):
    """REV-5 (issue 25): once decided, a report shows the decision taken (who, the code
    in words, the rationale); a new decision sits in a collapsed "Change the decision"
    only where one is allowed."""
    report_id = world.report_ids[0]
    token = login(client, "moderator@example.com")
    fields = {"decision_code": "remove_content", "rationale": "Spam link farm.", "csrf_token": token}
    client.post(f"/reports/{report_id}/decisions", data=fields)
    page = text(client.get(f"/reports/{report_id}"))
    taken = re.search(r'<section class="card" aria-labelledby="decided-h">(.*?)</section>', page, flags=re.S)
    assert taken, page
    words = visible(taken.group(1))
    assert "Remove content" in words and "Spam link farm." in words and "Maya" in words
    assert "Record a decision" not in page
    changes = re.search(r"<details[^>]*>\s*<summary>Change the decision</summary>", page)
    can_decide_again = 'action="/reports/%s/decisions"' % report_id in page
    assert bool(changes) == can_decide_again
    fresh = text(client.get(f"/reports/{world.report_ids[1]}"))
    assert "Record a decision" in fresh and "Change the decision" not in fresh


def test_after_reversed_the_maker_is_not_told_to_approve_the_correction(app, client, world, platform):
    """CORR-2 (issue 25): the reviewer who recorded "Reversed" cannot approve its
    correction, so the confirmation says so instead of "1 correction to approve next";
    the appeal's header says what was decided."""
    appeal_id = appeal_reversed(app, client, world)
    token = login(client, "reviewer2@example.com")
    response = reverse(client, appeal_id, token)
    assert response.status_code == 303
    page = text(client.get(f"/appeals/{appeal_id}"))
    notice = visible(re.search(r'<div id="notices".*?</div>', page, flags=re.S).group(0))
    assert "to approve next" not in notice
    assert "another reviewer" in notice and "made the appeal decision" in notice
    heading = visible(re.search(r"<h1>.*?</h1>", page, flags=re.S).group(0))
    assert "Decided" in heading and "Reversed" in heading


def test_operations_names_a_reversals_state_in_words_REV_3(client, world, platform):
    """REV-3, TEMP-2 (issue 25: Operations showed reversal state `queued`): a due
    reversal's state reads as its label, the code in the tooltip."""
    from .test_temporary_pages import applied_suspension

    _, reversal = applied_suspension(world, platform)
    login(client, "admin@example.com")
    operations = text(client.get("/operations"))
    row = re.search(r'<tr data-group="due">.*?</tr>', operations, flags=re.S).group(0)
    assert f"<code>{reversal.state}</code>" not in row
    assert f'<span class="badge state-{reversal.state}" title="state: {reversal.state}">' in row
    assert doubled(row) == []
