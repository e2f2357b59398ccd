"""The report API's DSA fields (SPEC DSA-2): a report's optional ``source`` and each
target's evidence ``language``, published in the OpenAPI document and checked by it."""

from __future__ import annotations

from sqlalchemy import func, select

from app.domain.dsa_facts import REPORT_SOURCES
from app.extensions import db
from app.models import Decision, Report, ReportEvidence

from ..builders import add_report_with_evidence, login, set_dsa_settings


def post(client, world, value):
    return client.post("/api/v1/reports", json=value, headers={"Authorization": f"Bearer {world.console_token}"})


def body(external_id: str, evidence: dict | None = None, **extra) -> dict:
    target = {"reference": "post:77", "kind": "post"}
    if evidence is not None:
        target["evidence"] = evidence
    return {"external_id": external_id, "targets": [target], **extra}


def rows() -> tuple[int, int]:
    db.session.rollback()
    return (db.session.scalar(select(func.count()).select_from(Report)),
            db.session.scalar(select(func.count()).select_from(ReportEvidence)))


def test_dsa2_the_api_takes_the_reports_source_and_the_evidence_language(app, client, world):
    """DSA-2: ``source`` is one of the report sources (stored), left out is a user's
    notice (None); ``language`` is ISO 639-1 in either case, stored in lower case."""
    answer = post(client, world, body("src-1", {"posted_at": "2026-11-30T08:15:00Z", "language": "DE"},
                                      source="trusted_flagger"))
    assert answer.status_code == 201, answer.get_json()
    report_id = answer.get_json()["report_id"]
    assert db.session.get(Report, report_id).source == "trusted_flagger"
    assert db.session.scalar(select(ReportEvidence.language).where(ReportEvidence.report_id == report_id)) == "de"
    plain = post(client, world, body("src-2"))
    assert plain.status_code == 201 and db.session.get(Report, plain.get_json()["report_id"]).source is None
    document = client.get("/api/v1/openapi.json").get_json()["components"]["schemas"]
    assert set(document["ReportIntake"]["properties"]["source"]["enum"]) == {*REPORT_SOURCES, None}
    assert "language" in document["Evidence"]["properties"]


def test_dsa2_an_unknown_source_or_language_is_refused_and_nothing_stored(app, client, world):
    """DSA-2: a source not in the list → 400 ``report_invalid`` naming ``source``; a
    language that is no ISO 639-1 code → 400 ``report_evidence_invalid`` naming its
    path; no row written."""
    before = rows()
    answer = post(client, world, body("bad-1", source="gossip"))
    error = answer.get_json()["error"]
    assert (answer.status_code, error["code"], error["field"]) == (400, "report_invalid", "source")
    for language in ("english", "xx", "e1"):
        answer = post(client, world, body("bad-2", {"language": language}))
        error = answer.get_json()["error"]
        assert answer.status_code == 400 and error["code"] in ("report_evidence_invalid", "report_invalid"), error
        assert error["field"] == "targets[0].evidence.language", error
    assert rows() == before


def test_dsa2_the_console_shows_a_refused_decision_in_words(app, client, world):
    """DSA-2: with DSA on, deciding in the console a report whose evidence gives no
    posted time answers 422 with the missing fact in words (on the report's page and
    the queue's), and as JSON with the code; nothing is decided."""
    set_dsa_settings(world.installation_id)
    report_id = add_report_with_evidence(world, "no-time-web", "post:3003", content_text="rude")
    subject_id = db.session.get(Report, report_id).subject_id
    token = login(client, "moderator@example.com")
    for path in (f"/reports/{report_id}/decisions", f"/queue/{subject_id}/decision"):
        answer = client.post(path, data={"csrf_token": token, "decision_code": "remove_content",
                                         "rationale": "Insults.", "idempotency_key": f"k-{path[-9:]}"})
        assert answer.status_code == 422, (path, answer.status_code)
        assert "needs the content date: the evidence of post:3003 gives no posted time." in answer.get_data(
            as_text=True), path
    answer = client.post(f"/reports/{report_id}/decisions", headers={"Accept": "application/json"},
                         data={"csrf_token": token, "decision_code": "remove_content", "rationale": "Insults.",
                               "idempotency_key": "k-json"})
    assert (answer.status_code, answer.get_json()["error"]["code"]) == (422, "dsa_statement_incomplete")
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Decision).where(Decision.report_id == report_id)) == 0


def test_dsa2_the_report_page_says_the_rationale_is_needed_only_with_dsa_on(app, client, world):
    """DSA-2: with DSA on, the decision form's rationale says a restriction needs it and
    that the statement and the user's notice quote it, before a refusal teaches it; with
    DSA off it says nothing of the kind."""
    report_id = add_report_with_evidence(world, "hint-web", "post:3004", content_text="rude")
    login(client, "moderator@example.com")
    hint = "Required for a restriction: its statement of reasons and the user&#39;s notice quote it"
    assert hint not in client.get(f"/reports/{report_id}").get_data(as_text=True)
    set_dsa_settings(world.installation_id)
    assert hint in client.get(f"/reports/{report_id}").get_data(as_text=True)
