"""Statements of reasons on Operations and the proposal page (SPEC DSA-3): counts,
refused statements with the Transparency Database's errors in words, the requeue of a
refused statement, and the proposal's statement panel."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.extensions import db
from app.models import AuditEvent, DsaStatement, OperatorUser
from app.services.dsa.requeue import requeue_statement
from app.services.dsa.sweep import submit_due_statements
from tests.builders import at_once, decide_report, login, set_dsa_settings, set_row
from tests.services.test_dsa_submission import pending_statements, states
from tests.services.test_dsa_sweep import tdb_connection

ADMIN = "admin@example.com"


def refused_world(world, tdb) -> tuple[list[str], DsaStatement]:
    """Three statements sent through the connection; the second one is refused for
    its missing content date. Returns the puids and the refused row."""
    tdb_connection(world, tdb)
    puids = pending_statements(world, 3, broken={1})
    assert submit_due_statements() == 2
    db.session.rollback()
    return puids, db.session.scalar(select(DsaStatement).where(DsaStatement.puid == puids[1]))


def statements_section(page: str) -> str:
    start = page.index('id="statements"')
    return page[start : page.index("</section>", start)]


def requeue_key(section: str) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', section).group(1)


def requeues() -> int:
    db.session.rollback()
    audited = select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "dsa.statement_requeued")
    return db.session.scalar(audited)


def test_dsa3_operations_lists_a_refused_statement_with_its_error_in_words(app, client, world, tdb):
    """DSA-3: Operations counts statements by state in words and lists the refused one
    with the database's field and message, a link to its proposal, and says a requeue
    sends it as it was built."""
    _, dead = refused_world(world, tdb)
    login(client, ADMIN)
    section = statements_section(client.get("/operations").get_data(as_text=True))
    assert "Sent through the connection <strong><bdi>EU Transparency Database</bdi></strong>" in section
    counts = dict(re.findall(r'<dd data-state="(\w+)">(\d+)</dd>', section))
    assert counts == {"pending": "0", "submitted": "2", "dead_letter": "1"}
    assert "Refused by the Transparency Database" in section and "In the Transparency Database" in section
    assert "<strong>content date</strong>: <q>The content date field is required.</q>" in section
    assert f'href="/proposals/{dead.proposal_id}"' in section and dead.puid in section
    assert "sends it again exactly as it was built" in section
    assert f'action="/operations/statements/{dead.id}/requeue"' in section


def test_dsa3_an_admin_requeues_a_refused_statement_once(app, client, world, tdb):
    """DSA-3: the requeue moves the refused statement back to pending, audited with the
    error it had; the same request again is answered as before and changes nothing; a
    second requeue (another page) is refused 409 and changes nothing; the next sweep
    sends it again as it was built (and the database refuses it again)."""
    puids, dead = refused_world(world, tdb)
    login(client, ADMIN)
    key = requeue_key(statements_section(client.get("/operations").get_data(as_text=True)))
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/operations").get_data(as_text=True)).group(1)
    path = f"/operations/statements/{dead.id}/requeue"
    answer = client.post(path, data={"csrf_token": token, "idempotency_key": key})
    assert answer.status_code == 303 and answer.headers["Location"].endswith("/operations#statements-h")
    page = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert f"Statement {dead.puid} is queued again" in page
    assert states()[dead.puid] == "pending" and requeues() == 1
    event = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "dsa.statement_requeued"))
    assert event.target_id == dead.id and "content_date" in event.details["error"]
    replay = client.post(path, data={"csrf_token": token, "idempotency_key": key})
    assert replay.status_code == 303 and requeues() == 1
    again = client.post(path, data={"csrf_token": token, "idempotency_key": "another-page"},
                        headers={"Accept": "application/json"})  # fmt: skip
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "dsa_statement_not_dead_letter"
    assert requeues() == 1 and states()[dead.puid] == "pending"
    assert submit_due_statements() == 0  # sent as it was built: refused again for the same field
    assert states()[dead.puid] == "dead_letter"
    assert tdb.batches()[-1].puids == [dead.puid]


def test_dsa3_a_refused_requeue_changes_nothing(app, client, world, tdb):
    """DSA-3: a reviewer may not requeue (403); a statement that is not refused, or
    that does not exist, is refused with its code and nothing changes."""
    puids, dead = refused_world(world, tdb)
    token = login(client, "reviewer@example.com")
    assert client.post(f"/operations/statements/{dead.id}/requeue", data={"csrf_token": token}).status_code == 403
    client.post("/logout", data={"csrf_token": token})
    token = login(client, ADMIN)
    submitted = db.session.scalar(select(DsaStatement.id).where(DsaStatement.puid == puids[0]))
    answer = client.post(
        f"/operations/statements/{submitted}/requeue", data={"csrf_token": token, "idempotency_key": "k1"}
    )
    assert answer.status_code == 409 and "dsa_statement_not_dead_letter" in answer.get_data(as_text=True)
    missing = client.post(
        "/operations/statements/sor_nothing/requeue", data={"csrf_token": token, "idempotency_key": "k2"}
    )
    assert missing.status_code == 404
    no_key = client.post(f"/operations/statements/{dead.id}/requeue", data={"csrf_token": token})
    assert no_key.status_code == 400 and "idempotency_key_invalid" in no_key.get_data(as_text=True)
    assert states() == {puids[0]: "submitted", puids[1]: "dead_letter", puids[2]: "submitted"}
    assert requeues() == 0


def test_dsa3_operations_says_when_there_is_no_connection(app, client, world):
    """DSA-3: with DSA on and no Transparency Database connection, Operations says so
    in words; nothing is sent."""
    set_dsa_settings(world.installation_id)
    pending_statements(world, 1)
    login(client, ADMIN)
    section = statements_section(client.get("/operations").get_data(as_text=True))
    assert "No Transparency Database connection" in section
    assert "the DSA settings name no connection for the Transparency Database." in section
    assert 'data-state="pending">1<' in section


def statement_panel(client, proposal_id: str) -> str:
    page = client.get(f"/proposals/{proposal_id}").get_data(as_text=True)
    panel = page[page.index('id="statement-panel"') :]
    return panel[: panel.index("</section>")]


def test_dsa3_a_pending_statement_says_why_it_waits_without_a_connection(app, client, world, tdb):
    """DSA-3: with no Transparency Database connection (the demo's settings), the
    proposal page says nothing is sent and why, with a link to Operations, instead of
    promising the next batch; once a connection is named, it says the sweep sends it."""
    set_dsa_settings(world.installation_id)
    pending_statements(world, 1)
    statement = db.session.scalar(select(DsaStatement))
    login(client, ADMIN)
    panel = statement_panel(client, statement.proposal_id)
    assert "nothing is sent until an admin fixes it" in panel
    assert "the DSA settings name no connection for the Transparency Database." in panel
    assert 'href="/operations#statements-h"' in panel and "next batch" not in panel
    tdb_connection(world, tdb)
    panel = statement_panel(client, statement.proposal_id)
    assert "the sweep sends it in its next batch" in panel and "nothing is sent" not in panel


def test_dsa3_the_proposal_page_shows_its_statement(app, client, world, tdb):
    """DSA-3, DSA-5: the proposal page shows the statement's state in words, puid,
    when it was submitted and the database's id; a refused one its error; a reversal
    on appeal when recorded. A proposal without a statement has no panel."""
    puids, dead = refused_world(world, tdb)
    login(client, ADMIN)
    submitted = db.session.scalar(select(DsaStatement).where(DsaStatement.puid == puids[0]))
    page = client.get(f"/proposals/{submitted.proposal_id}").get_data(as_text=True)
    panel = page[page.index('id="statement-panel"') :]
    panel = panel[: panel.index("</section>")]
    assert "In the Transparency Database" in panel and submitted.puid in panel
    assert submitted.tdb_uuid and submitted.tdb_uuid == tdb.statements[submitted.puid]["uuid"]
    assert submitted.tdb_uuid in panel and "not yet" not in panel
    assert "Reversed on appeal" not in panel
    set_row(DsaStatement, submitted.id, reversed_at=utcnow() - timedelta(minutes=5))
    assert "Reversed on appeal" in client.get(f"/proposals/{submitted.proposal_id}").get_data(as_text=True)
    page = client.get(f"/proposals/{dead.proposal_id}").get_data(as_text=True)
    assert "Refused by the Transparency Database" in page
    assert "<strong>content date</strong>: <q>The content date field is required.</q>" in page
    other = decide_report(world, 1)
    assert 'id="statement-panel"' not in client.get(f"/proposals/{other.id}").get_data(as_text=True)


def test_dsa3_the_same_requeue_twice_at_once_requeues_once(app, world, tdb):
    """DSA-3: a double click (the same key, two requests at once) requeues once: one
    audit row, both answered with the statement, neither refused."""
    _, dead = refused_world(world, tdb)
    admin_id = world.users["admin"]

    def requeue():
        operator = db.session.get(OperatorUser, admin_id)
        return requeue_statement(operator, dead.id, "double-click")

    results = at_once(app, [requeue, requeue])
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(r.idempotent_replay for r in results) == [False, True]
    assert requeues() == 1 and states()[dead.puid] == "pending"
