"""Complaints against restrictions (SPEC DSA-5): the complaint window, the reversal
recorded against the statement of reasons, and the appeal's outcome notice, through
the real services, the platform API and the console."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Appeal, AppealDecision, AuditEvent, DsaStatement, Integration, Report
from app.models.dsa import mark_reversed
from app.services.cases.appeals import decide_appeal, file_appeal, redact_rationale
from app.services.lifecycle.dispatch import deliver
from app.services.uow import Actor, unit_of_work
from tests.builders import approve, decide_report, login, set_dsa_settings, set_row

WINDOW_DAYS = 183


def applied_with_statement(world, *, language: str = "en") -> DsaStatement:
    """The world's flow with DSA on (the demo's settings, the notice language
    `language` by default, ISO 639-1): a takedown decided, approved and applied on the
    platform, and the statement of reasons its applied receipt built (DSA-2), its
    complaint window 183 days from the decision."""
    set_dsa_settings(world.installation_id, {**DEMO_DSA_SETTINGS, "default_language": language})
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    db.session.rollback()
    statement = db.session.scalar(select(DsaStatement).where(DsaStatement.proposal_id == proposal.id))
    assert statement.language == language and statement.complaint_until is not None
    return statement


def appeal_by_api(client, world, external_id: str | None = None):
    body = {"report_external_id": "demo-report-1", "statement": "It was satire."}
    if external_id:
        body["external_id"] = external_id
    return client.post("/api/v1/appeals", headers=bearer(world), json=body)


def bearer(world) -> dict:
    return {"Authorization": f"Bearer {world.console_token}"}


def counts() -> tuple[int, int]:
    db.session.rollback()
    return (
        db.session.scalar(select(func.count()).select_from(Appeal)),
        db.session.scalar(select(func.count()).select_from(AuditEvent)),
    )


# -- the complaint window -------------------------------------------------------------


def test_dsa5_an_appeal_a_day_after_the_window_is_refused_and_stores_nothing(app, client, world, platform, clock):
    """DSA-5: filed one day after the statement's complaint_until, the platform's
    appeal is refused 409 ``appeal_window_closed`` naming the last day; no appeal, no
    audit event, the report still decided."""
    statement = applied_with_statement(world)
    clock.advance(days=WINDOW_DAYS + 1)
    before = counts()
    response = appeal_by_api(client, world, external_id="late-1")
    assert response.status_code == 409
    error = response.get_json()["error"]
    assert error["code"] == "appeal_window_closed"
    assert f"until {statement.complaint_until:%Y-%m-%d %H:%M} UTC" in error["message"]
    assert counts() == before
    assert db.session.get(Report, world.report_ids[0]).state == "decided"


def test_dsa5_an_appeal_within_the_window_is_accepted(app, client, world, platform, clock):
    """DSA-5: filed one day before the window closes, the appeal is filed (201)."""
    applied_with_statement(world)
    clock.advance(days=WINDOW_DAYS - 1)
    response = appeal_by_api(client, world)
    assert response.status_code == 201, response.get_json()
    answer = response.get_json()
    assert (answer["created"], answer["state"], answer["outcome"], answer["outcome_notice"]) == (
        True,
        "open",
        None,
        None,
    )
    assert db.session.get(Appeal, answer["appeal_id"]) is not None


def test_dsa5_the_console_refuses_a_late_appeal_too(app, client, world, platform, clock):
    """DSA-5: the report page gives the window while open and says it ended after;
    the moderator's "File an appeal" form sent after the window: the page says why
    (409 ``appeal_window_closed``), nothing stored."""
    applied_with_statement(world)
    token = login(client, "moderator@example.com")
    report_page = f"/reports/{world.report_ids[0]}"
    assert "Appeals may be filed until" in client.get(report_page).get_data(as_text=True)
    clock.advance(days=WINDOW_DAYS + 1)
    page = client.get(report_page).get_data(as_text=True)
    assert "The time to appeal has ended." in page and "File an appeal on the latest decision" not in page
    before = counts()
    response = client.post(
        f"/reports/{world.report_ids[0]}/appeals", data={"statement": "Too late?", "csrf_token": token}
    )
    assert response.status_code == 409
    page = response.get_data(as_text=True)
    assert "appeal_window_closed" in page and "appeals could be filed until" in page
    assert counts() == before


def test_dsa5_a_decision_without_a_statement_is_appealable_as_before(app, world, platform, clock):
    """DSA-5: no statement of reasons (DSA off here): a year later the appeal is
    still filed, as before the complaint window existed."""
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    clock.advance(days=365)
    result = file_appeal(
        world.report_ids[0],
        statement="Much later",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    )
    assert result.created


def test_dsa5_the_service_refuses_after_the_window_with_the_code(app, world, platform, clock):
    """DSA-5: `file_appeal` itself refuses (every path goes through it)."""
    applied_with_statement(world)
    clock.advance(days=WINDOW_DAYS + 1)
    with pytest.raises(ApiError) as refused:
        file_appeal(
            world.report_ids[0],
            statement="",
            actor=Actor("operator", world.users["moderator"]),
            installation_id=world.installation_id,
        )
    assert (refused.value.status, refused.value.code) == (409, "appeal_window_closed")


# -- the reversal, recorded against the statement -------------------------------------


def appeal_and_decide(world, outcome: str, rationale: str = "Satire is allowed here.") -> tuple[str, str]:
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="It was satire.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    result = decide_appeal(appeal_id, outcome=outcome, rationale=rationale, operator=world.user("reviewer2"))
    return appeal_id, result.appeal_decision_id


def test_dsa5_a_reversal_on_appeal_is_recorded_on_the_statement(app, world, platform):
    """DSA-5: an appeal decided ``reversed`` sets the statement's reversed_at (the
    appeal decision's time) and reversal_appeal_id in its transaction, audited
    ``dsa.statement_reversed``; a second write changes nothing (idempotent)."""
    statement = applied_with_statement(world)
    appeal_id, decision_id = appeal_and_decide(world, "reversed")
    db.session.expire_all()
    row = db.session.get(DsaStatement, statement.id)
    decided = db.session.get(AppealDecision, decision_id)
    assert (row.reversed_at, row.reversal_appeal_id) == (decided.created_at, appeal_id)
    audits = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "dsa.statement_reversed")).all()
    assert [(a.target_type, a.target_id, a.details["appeal_id"]) for a in audits] == [
        ("dsa_statement", statement.id, appeal_id)
    ]
    with unit_of_work() as uow:
        again = mark_reversed(
            uow.session,
            world.installation_id,
            world.report_ids[0],
            db.session.get(Appeal, appeal_id).decision_id,
            appeal_id=appeal_id,
            at=decided.created_at + timedelta(days=1),
        )
        uow.commit()
    assert again == []
    db.session.expire_all()
    assert db.session.get(DsaStatement, statement.id).reversed_at == decided.created_at


@pytest.mark.parametrize("outcome", ["upheld", "modified"])
def test_dsa5_only_a_reversal_is_recorded_on_the_statement(app, world, platform, outcome):
    """DSA-5: an upheld or modified outcome leaves the statement unreversed."""
    statement = applied_with_statement(world)
    appeal_and_decide(world, outcome)
    db.session.expire_all()
    row = db.session.get(DsaStatement, statement.id)
    assert (row.reversed_at, row.reversal_appeal_id) == (None, None)
    assert not db.session.scalar(
        select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "dsa.statement_reversed")
    )


# -- the outcome notice, where the platform learns the outcome -----------------------


def test_dsa5_the_platform_reads_the_outcome_notice_in_the_users_language(app, client, world, platform):
    """DSA-5: once decided, the appeal's API representation carries the outcome and
    ``outcome_notice`` in the affected user's language (the statement's: German),
    naming out-of-court dispute settlement and the reason; the repeat of the filing
    gives the same."""
    applied_with_statement(world, language="de")
    filed = appeal_by_api(client, world, external_id="ap-1").get_json()
    assert client.get(f"/api/v1/appeals/{filed['appeal_id']}", headers=bearer(world)).get_json()["state"] == "open"
    reviewer = world.user("reviewer2")
    decide_appeal(filed["appeal_id"], outcome="reversed", rationale="Satire ist erlaubt.", operator=reviewer)
    answer = client.get(f"/api/v1/appeals/{filed['appeal_id']}", headers=bearer(world)).get_json()
    assert (answer["state"], answer["outcome"], answer["external_id"]) == ("decided", "reversed", "ap-1")
    notice = answer["outcome_notice"]
    assert notice["language"] == "de"
    assert "außergerichtlichen Streitbeilegungsstelle" in notice["text"]
    assert "Begründung: Satire ist erlaubt." in notice["text"]
    assert "aufgehoben" in notice["text"]
    repeat = appeal_by_api(client, world, external_id="ap-1")
    assert repeat.status_code == 200
    assert repeat.get_json()["outcome_notice"] == notice


def test_dsa5_a_redacted_reason_leaves_the_notice(app, client, world, platform):
    """DSA-5: after an admin redacts the rationale the notice keeps the outcome and
    the referral to dispute settlement, without the removed words."""
    applied_with_statement(world)
    appeal_id, decision_id = appeal_and_decide(world, "upheld", rationale="Name of a third person")
    redact_rationale(decision_id, operator=world.user("admin"))
    text = client.get(f"/api/v1/appeals/{appeal_id}", headers=bearer(world)).get_json()["outcome_notice"]["text"]
    assert "third person" not in text
    assert "No further reason was recorded" in text and "out-of-court dispute settlement body" in text


def test_dsa5_no_notice_without_dsa(app, client, world, platform):
    """DSA-5: an installation with DSA off and no statement gives no outcome notice;
    an unknown appeal is 404 ``appeal_not_found``."""
    decide_report(world)
    appeal_id = appeal_by_api(client, world).get_json()["appeal_id"]
    decide_appeal(appeal_id, outcome="upheld", rationale="Stands.", operator=world.user("reviewer2"))
    answer = client.get(f"/api/v1/appeals/{appeal_id}", headers=bearer(world)).get_json()
    assert (answer["outcome"], answer["outcome_notice"]) == ("upheld", None)
    missing = client.get("/api/v1/appeals/apl_nothing", headers=bearer(world))
    assert (missing.status_code, missing.get_json()["error"]["code"]) == (404, "appeal_not_found")


def test_dsa5_another_platforms_appeal_is_not_found(app, client, world, platform):
    """DSA-5: an appeal is read only by the platform whose report it is (404)."""
    decide_report(world)
    appeal_id = appeal_by_api(client, world).get_json()["appeal_id"]
    with unit_of_work() as uow:
        other = Integration(installation_id=world.installation_id, name="Other", slug="other-dsa5")
        uow.session.add(other)
        uow.commit()
        other_id = other.id
    set_row(Report, world.report_ids[0], integration_id=other_id)
    answer = client.get(f"/api/v1/appeals/{appeal_id}", headers=bearer(world))
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (404, "appeal_not_found")


def test_dsa5_the_appeal_page_shows_the_outcome_notice(app, client, world, platform):
    """DSA-5: the appeal page shows the notice the complainant is given, in words."""
    applied_with_statement(world)
    appeal_id, _ = appeal_and_decide(world, "reversed", rationale="Satire <is> allowed")
    login(client, "reviewer@example.com")
    page = client.get(f"/appeals/{appeal_id}").get_data(as_text=True)
    assert 'id="outcome-notice"' in page and "in English" in page
    assert "We reversed our decision" in page
    assert "Reason: Satire &lt;is&gt; allowed" in page
    assert "out-of-court dispute settlement body certified under Article 21" in page
