"""Landing by role (SPEC QUEUE-5) and queues' time-to-decide targets set by one admin
(QUEUE-4), on a page and from the command line, audited."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.demo import DEMO_PASSWORD
from app.domain.errors import ApiError
from app.domain.landing import landing_endpoint
from app.domain.time_targets import parse_target, target_words
from app.extensions import db
from app.models import AuditEvent, Queue

from ..builders import login, logout, pass_second_factor


@pytest.mark.parametrize("roles, endpoint", [
    (["moderator"], "console.queue"),
    (["reviewer"], "console.tasks"),
    (["admin"], "admin.index"),
    (["auditor"], "console.proposals"),
    (["admin", "reviewer"], "console.tasks"),
    (["reviewer", "moderator"], "console.queue"),
    (["admin", "moderator", "reviewer"], "console.queue"),
])
def test_each_role_lands_on_its_own_work_QUEUE_5(roles, endpoint):
    """QUEUE-5: moderator first, then reviewer, then admin; an auditor reads proposals."""
    assert landing_endpoint(roles) == endpoint


@pytest.mark.parametrize("email, path", [
    ("moderator@example.com", "/queue"),
    ("reviewer@example.com", "/tasks"),
    ("admin2@example.com", "/admin/"),
    ("auditor@example.com", "/proposals"),
])
def test_signing_in_lands_by_role_QUEUE_5(app, client, world, email, path):
    """QUEUE-5: after signing in, "/" (and /login when signed in) sends each to their work."""
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', page).group(1)
    signed = client.post("/login", data={"email": email, "password": DEMO_PASSWORD, "csrf_token": token})
    signed = pass_second_factor(client, signed, email)  # reviewers and admins: the code (OPS-2)
    assert signed.status_code == 303 and signed.headers["Location"] == "/"
    response = client.get("/")
    assert response.status_code == 302 and response.headers["Location"].endswith(path)
    assert client.get("/login").headers["Location"].endswith("/")
    logout(client, token)


def test_an_admin_lands_on_changes_waiting_and_connection_health_QUEUE_5(app, client, world):
    """QUEUE-5: the admin index shows the changes waiting and each connection's health."""
    login(client, "admin2@example.com")
    page = client.get("/admin/").get_data(as_text=True)
    assert 'id="pending-changes"' in page and "waiting" in page
    assert 'id="connections-h"' in page and "data-breaker=" in page


def test_target_words_and_parsing_QUEUE_4():
    """QUEUE-4: targets read as 90m, 4h, 2d or minutes; outside 1 min .. 30 days refused."""
    assert parse_target("90m") == 5400 and parse_target("4h") == 14400 and parse_target("2d") == 172800
    assert parse_target("45") == 2700 and parse_target(" ") is None
    for bad in ("4 hours", "0m", "31d", "-5"):
        with pytest.raises(ApiError) as error:
            parse_target(bad)
        assert error.value.code == "queue_target_invalid"
    assert target_words(14400) == "4 h" and target_words(5400) == "90 min" and target_words(None) == "no target"


def test_one_admin_sets_a_queue_target_on_the_page_QUEUE_4(app, client, world):
    """QUEUE-4: an admin sets a queue's time to decide alone (it changes no action),
    audited with before and after; a bad value is refused in words; others cannot."""
    token = login(client, "admin2@example.com")
    assert "no target" in client.get("/admin/queues").get_data(as_text=True)
    response = client.post("/admin/queues", data={"csrf_token": token, "queue": "general", "target": "4h"})
    assert response.status_code == 303
    assert "now has 4 h to decide" in client.get("/admin/queues").get_data(as_text=True)
    db.session.rollback()
    assert db.session.scalar(select(Queue.decide_within_seconds).where(Queue.slug == "general")) == 14400
    event = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "queue.target_set"))
    assert event.details["before_seconds"] is None and event.details["after_seconds"] == 14400
    bad = client.post("/admin/queues", data={"csrf_token": token, "queue": "general", "target": "soon"})
    assert bad.status_code == 400 and "e.g. 90m, 4h or 2d" in bad.get_data(as_text=True)
    assert client.post("/admin/queues", data={"csrf_token": token, "queue": "nope", "target": "1h"}).status_code == 404
    logout(client, token)
    token = login(client, "moderator@example.com")
    refused = client.post("/admin/queues", data={"csrf_token": token, "queue": "general", "target": "1h"})
    assert refused.status_code == 403


def test_the_queue_target_command_QUEUE_4(app, world):
    """QUEUE-4: `flask queue-target` sets and clears a target as a named admin."""
    runner = app.test_cli_runner()
    result = runner.invoke(args=["queue-target", "general", "90m", "--installation", "demo",
                                 "--admin", "admin2@example.com"])
    assert result.exit_code == 0 and "90 min to decide" in result.output
    result = runner.invoke(args=["queue-target", "general", "", "--installation", "demo",
                                 "--admin", "admin2@example.com"])
    assert result.exit_code == 0 and "no target" in result.output
    result = runner.invoke(args=["queue-target", "general", "1h", "--installation", "demo",
                                 "--admin", "moderator@example.com"])
    assert result.exit_code == 1 and "proposer_not_found" in result.output
