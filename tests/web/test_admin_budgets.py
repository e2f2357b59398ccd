"""Admin: budgets (limit per window, per workflow, component or queue); raising a
limit or deactivating waits for a second admin (FOUR-2)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import Budget, Queue
from app.services.lifecycle.budget_reservations import window_start

from ..builders import approve_in_console, approve_pending, pending_changes, set_row
from .test_admin import admin, assert_refused, audits, other_world, post, snapshot, text


def queue_id(installation_id: str) -> str:
    return db.session.scalar(select(Queue.id).where(Queue.installation_id == installation_id))


def create(client, csrf, **data):
    return post(client, "/admin/budgets", csrf, **data)


def only_budget() -> Budget:
    db.session.rollback()
    [budget] = db.session.scalars(select(Budget)).all()
    return budget


def test_create_change_deactivate_and_reactivate(app, client, world):
    csrf = admin(client)
    queue = queue_id(world.installation_id)
    response = create(client, csrf, scope_type="queue", scope_id=queue, limit_amount="5", window_seconds="3600")
    [creation] = pending_changes()  # FOUR-4: a budget lets automation run, so it waits for a second admin
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{creation.id}")
    assert snapshot(Budget) == (0,)
    assert approve_pending(app) == [creation.id]
    budget = only_budget()
    assert (budget.installation_id, budget.scope_type, budget.scope_id, budget.metric) == (
        world.installation_id,
        "queue",
        queue,
        "actions",
    )
    assert (budget.limit_amount, budget.window_seconds, budget.active, budget.used_amount) == (5, 3600, True, 0)
    [event] = audits("admin.budget_created")
    assert event.target_id == budget.id and event.actor_id == world.user("admin").id
    assert json.loads(event.details_json)["config_change_id"] == creation.id
    assert "queue: General" in text(client.get("/admin/budgets"))

    assert post(client, f"/admin/budgets/{budget.id}/limit", csrf, limit_amount="3").status_code == 303
    assert only_budget().limit_amount == 3  # lowering bounds more: at once
    [event] = audits("admin.budget_limit_changed")
    assert json.loads(event.details_json) == {"before": 5, "after": 3}

    response = post(client, f"/admin/budgets/{budget.id}/limit", csrf, limit_amount="12")
    [raise_] = pending_changes()
    assert response.status_code == 303 and response.headers["Location"].endswith(f"/admin/changes/{raise_.id}")
    assert only_budget().limit_amount == 3  # a raise waits for a second admin (FOUR-2)
    assert approve_in_console(app, raise_.id).status_code == 303
    assert only_budget().limit_amount == 12
    event = audits("admin.budget_limit_changed")[-1]
    assert json.loads(event.details_json) == {"before": 3, "after": 12, "config_change_id": raise_.id}
    assert event.actor_id == world.user("admin").id  # the change is its proposer's, approved by another

    assert post(client, f"/admin/budgets/{budget.id}/deactivate", csrf).status_code == 303
    assert only_budget().active is True  # deactivating waits for a second admin too
    [deactivation] = pending_changes()
    assert approve_in_console(app, deactivation.id).status_code == 303
    assert only_budget().active is False
    assert "deactivated" in text(client.get("/admin/budgets"))
    assert post(client, f"/admin/budgets/{budget.id}/activate", csrf).status_code == 303
    assert only_budget().active is False  # FOUR-4: reactivating lets automation run again: it waits
    [reactivation] = pending_changes()
    assert "It reactivates a budget" in text(client.get(f"/admin/changes/{reactivation.id}"))
    assert approve_pending(app) == [reactivation.id] and only_budget().active is True
    assert len(audits("admin.budget_deactivated")) == 1 and len(audits("admin.budget_activated")) == 1


def test_the_page_shows_the_current_windows_usage(app, client, world):
    csrf = admin(client)
    create(
        client,
        csrf,
        scope_type="component",
        scope_id=world.components["takedown"],
        limit_amount="10",
        window_seconds="86400",
    )
    approve_pending(app)
    budget = only_budget()
    start = window_start(utcnow(), 86400)
    set_row(Budget, budget.id, used_amount=7, window_start=start)
    page = text(client.get("/admin/budgets"))
    assert "<strong>7</strong> of 10" in page and "component: Take down content v1" in page
    assert start.strftime("%Y-%m-%d %H:%M:%S") in page
    set_row(Budget, budget.id, used_amount=9, window_start=window_start(utcnow(), 86400).replace(year=2020))
    assert "<strong>0</strong> of 10" in text(client.get("/admin/budgets"))  # an old window counts nothing now


@pytest.mark.parametrize(
    "overrides, status, code",
    [
        ({"scope_type": "team"}, 400, "budget_scope_invalid"),
        ({"scope_id": "que_nope"}, 400, "budget_scope_invalid"),
        ({"scope_type": "workflow"}, 400, "budget_scope_invalid"),  # a queue id given as a workflow version
        ({"limit_amount": "0"}, 400, "budget_limit_invalid"),
        ({"limit_amount": "-3"}, 400, "budget_limit_invalid"),
        ({"limit_amount": "2.5"}, 400, "budget_limit_invalid"),
        ({"limit_amount": "lots"}, 400, "budget_limit_invalid"),
        ({"limit_amount": "1000001"}, 400, "budget_limit_invalid"),
        ({"limit_amount": "9" * 40}, 400, "budget_limit_invalid"),
        ({"window_seconds": "59"}, 400, "budget_window_invalid"),
        ({"window_seconds": "2678401"}, 400, "budget_window_invalid"),
        ({"window_seconds": ""}, 400, "budget_window_invalid"),
    ],
)
def test_budget_refusals_change_nothing(app, client, world, overrides, status, code):
    csrf = admin(client)
    data = {
        "scope_type": "queue",
        "scope_id": queue_id(world.installation_id),
        "limit_amount": "5",
        "window_seconds": "3600",
        **overrides,
    }
    before = snapshot()
    page = assert_refused(create(client, csrf, **data), status, code)
    assert snapshot() == before
    assert f'value="{data["limit_amount"]}"' in page  # what was typed is kept


def test_one_budget_per_scope(app, client, world):
    csrf = admin(client)
    data = {"scope_type": "queue", "scope_id": queue_id(world.installation_id), "window_seconds": "3600"}
    assert create(client, csrf, limit_amount="5", **data).status_code == 303
    approve_pending(app)
    before = snapshot()
    assert_refused(create(client, csrf, limit_amount="6", **data), 409, "budget_exists")
    assert snapshot() == before and only_budget().limit_amount == 5
    post(client, f"/admin/budgets/{only_budget().id}/deactivate", csrf)
    [deactivation] = pending_changes()
    approve_in_console(app, deactivation.id)
    before = snapshot()
    page = assert_refused(create(client, csrf, limit_amount="6", **data), 409, "budget_exists")
    assert "reactivate" in page
    assert snapshot() == before


def test_a_bad_limit_change_is_refused_in_its_row(app, client, world):
    csrf = admin(client)
    create(
        client,
        csrf,
        scope_type="queue",
        scope_id=queue_id(world.installation_id),
        limit_amount="5",
        window_seconds="60",
    )
    approve_pending(app)
    budget = only_budget()
    before = snapshot()
    page = assert_refused(
        post(client, f"/admin/budgets/{budget.id}/limit", csrf, limit_amount="0"), 400, "budget_limit_invalid"
    )
    assert f'id="limit-{budget.id}"' in page and 'value="0"' in page
    assert only_budget().limit_amount == 5 and snapshot() == before


def test_another_installations_scope_and_budget(app, client, world, platform):
    other = other_world(platform)
    csrf = admin(client)
    before = snapshot()
    response = create(
        client,
        csrf,
        scope_type="queue",
        scope_id=queue_id(other.installation_id),
        limit_amount="5",
        window_seconds="60",
    )
    assert_refused(response, 400, "budget_scope_invalid")
    assert snapshot() == before
    other_budget = Budget(
        installation_id=other.installation_id,
        scope_type="workflow",
        scope_id=other.workflow_version_id,
        limit_amount=3,
        window_seconds=60,
    )
    db.session.add(other_budget)
    db.session.commit()
    before = snapshot()
    for action, data in (("limit", {"limit_amount": "99"}), ("deactivate", {}), ("activate", {})):
        assert post(client, f"/admin/budgets/{other_budget.id}/{action}", csrf, **data).status_code == 404
    assert snapshot() == before
    db.session.rollback()
    assert (db.session.get(Budget, other_budget.id).limit_amount, db.session.get(Budget, other_budget.id).active) == (
        3,
        True,
    )
    assert other_budget.id not in text(client.get("/admin/budgets"))
