"""The admin page of bulk caps (SPEC BULK-5): every role with its cap, the default
1,000 marked, and a form whose proposal waits for a second admin."""

from __future__ import annotations

from app.extensions import db
from app.services.bulk.dry_runs import operator_cap

from ..builders import approve_pending, login, pending_changes
from .test_admin import admin, assert_refused, post, text


def test_bulk_5_the_caps_page_lists_roles_and_a_proposal_applies_on_approval(app, client, world):
    """BULK-5: the page shows each role at the default 1,000; a proposal redirects to
    the change page and the page still shows the default until a second admin approves."""
    csrf = admin(client)
    page = text(client.get("/admin/bulk-caps"))
    assert "Bulk caps" in page and page.count("(default)") == 5 and "1,000" in page
    response = post(client, "/admin/bulk-caps", csrf, role="reviewer", max_items="2500")
    [change] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{change.id}")
    assert "raises the items per bulk batch for reviewer from 1,000 to 2,500" in text(client.get(response.headers["Location"]))
    assert "2,500" not in text(client.get("/admin/bulk-caps"))
    approve_pending(app)
    assert "2,500" in text(client.get("/admin/bulk-caps"))
    assert operator_cap(db.session, world.user("reviewer")) == 2500


def test_bulk_5_a_bad_cap_is_answered_on_the_page_and_as_json(app, client, world):
    """BULK-5: a cap out of range is refused next to its field (400, nothing stored);
    a JSON client gets the code."""
    csrf = admin(client)
    assert_refused(post(client, "/admin/bulk-caps", csrf, role="reviewer", max_items="0"), 400, "1 to 100,000")
    response = client.post(
        "/admin/bulk-caps",
        data={"csrf_token": csrf, "role": "nobody", "max_items": "5"},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "bulk_cap_role_invalid"
    assert pending_changes() == []


def test_bulk_5_an_auditor_sees_the_caps_but_cannot_propose(app, client, world):
    """BULK-5: auditors read the page; the form is not theirs (403)."""
    csrf = login(client, "auditor@example.com")
    assert "Propose a cap" not in text(client.get("/admin/bulk-caps"))
    assert post(client, "/admin/bulk-caps", csrf, role="reviewer", max_items="5").status_code == 403
    assert pending_changes() == []
