"""The API checks request bodies against the schemas its OpenAPI document publishes
(one contract), and answers with the codes and messages it always gave (API-1, API-3,
REV-1, FOUR-10)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import Appeal, AuditEvent
from app.web.api.contract import CONTRACTS, check_body, field_order
from app.web.api.openapi import openapi_document

DIGEST = "sha256:" + "a" * 64
RECEIPT = {"action_id": "act_1", "status": "failed", "operation_id": "op", "payload_digest": DIGEST}
REPORT = {"external_id": "e-1", "targets": [{"reference": "post:1"}]}


def refusal(operation_id, body) -> ApiError:
    with pytest.raises(ApiError) as caught:
        check_body(operation_id, body)
    return caught.value


def test_every_operation_with_a_body_has_its_refusals():
    """The contract is the document: each request body it publishes is checked."""
    with_body = {
        operation["operationId"]
        for operations in openapi_document()["paths"].values()
        for operation in operations.values()
        if "requestBody" in operation
    }
    assert with_body == set(CONTRACTS)
    assert field_order("postReport")[0] == "external_id"  # through the $ref to ReportIntake


@pytest.mark.parametrize(
    "body",
    [
        REPORT,
        {**REPORT, "queue": None, "summary": None},
        {**REPORT, "targets": [{"reference": "post:1", "evidence": {"content_text": None, "media": None}}]},
    ],
)
def test_a_report_the_document_allows_passes(body):
    check_body("postReport", body)


@pytest.mark.parametrize(
    "body",
    [
        RECEIPT,
        {**RECEIPT, "extra_field": 1},  # EDGE-2: fields the contract does not list are ignored
        {**RECEIPT, "terminal": None, "error_code": None, "provider_request_id": None},  # null: not sent
        {**RECEIPT, "retry_after_seconds": 30.0},  # an integer-valued number (EDGE-1)
    ],
)
def test_a_receipt_the_document_allows_passes(body):
    check_body("postActionResult", body)


@pytest.mark.parametrize(
    "body, status, code, field",
    [
        ({**RECEIPT, "action_id": "x" * 501, "operation_id": None}, 400, "action_result_invalid", "action_id"),
        ({"action_id": "a", "status": "accepted"}, 400, "action_result_invalid", "status"),
        ({**RECEIPT, "retry_after_seconds": True}, 400, "action_result_invalid", "retry_after_seconds"),
        ({k: v for k, v in RECEIPT.items() if k != "operation_id"}, 409, "action_result_identity_mismatch", None),
        ({**RECEIPT, "payload_digest": 5}, 409, "action_result_identity_mismatch", None),
    ],
)
def test_a_receipt_is_refused_as_before(body, status, code, field):
    """API-1: the action id and status first; API-3: a receipt that cannot name its
    proposal's operation or digest is the identity mismatch it always was."""
    error = refusal("postActionResult", body)
    assert (error.status, error.code, error.field) == (status, code, field)


@pytest.mark.parametrize(
    "body, code, field, message",
    [
        ([], "report_invalid", None, "Send a JSON object."),
        ({**REPORT, "b": 1, "a": 2}, "report_invalid", "a", "Unknown field: a."),
        ({"targets": []}, "report_invalid", "external_id", "external_id must be 1 to 200 characters."),
        (
            {**REPORT, "summary": "x" * 5001},
            "report_invalid",
            "summary",
            "summary must be text of at most 5000 characters.",
        ),
        ({**REPORT, "targets": [{"kind": "post"}]}, "report_invalid", "targets", None),
        ({**REPORT, "targets": [{"reference": "p\u043est:1"}]}, "reference_characters", "targets[0].reference", None),
        ({**REPORT, "external_id": "e\u200b"}, "reference_characters", "external_id", None),
        (
            {**REPORT, "targets": [{"reference": "post:1", "evidence": {"permalink": "https://a.example@b.example/"}}]},
            "url_userinfo",
            "targets[0].evidence.permalink",
            None,
        ),
        (
            {**REPORT, "targets": [{"reference": "post:1", "evidence": {"media": [{"url": "https://a.example/"}]}}]},
            "report_evidence_invalid",
            "targets[0].evidence.media[0]",
            "targets[0].evidence.media[0] needs exactly url, sha256 and mime_type.",
        ),
    ],
)
def test_a_report_is_refused_as_before(body, code, field, message):
    """REV-1, FOUR-10: the schema refuses; the domain names evidence and reference
    problems with its own codes."""
    error = refusal("postReport", body)
    assert (error.status, error.code, error.field) == (400, code, field)
    assert message is None or error.message == message


@pytest.mark.parametrize(
    "body, code, field",
    [
        ("text", "appeal_invalid", None),
        ({"report_external_id": "r", "other": 1}, "appeal_invalid", None),
        ({"statement": "s"}, "appeal_invalid", "report_external_id"),
        ({"report_external_id": "r" * 201}, "appeal_invalid", "report_external_id"),
        ({"report_external_id": "r", "statement": "s" * 5001}, "appeal_statement_invalid", "statement"),
        ({"report_external_id": "r", "external_id": ""}, "appeal_external_id_invalid", "external_id"),
        ({"report_external_id": "r", "external_id": "a\u202e"}, "reference_characters", "external_id"),
    ],
)
def test_an_appeal_is_refused_as_before(body, code, field):
    error = refusal("postAppeal", body)
    assert (error.status, error.code, error.field) == (400, code, field)


def test_an_appeal_may_leave_its_optional_fields_null():
    check_body("postAppeal", {"report_external_id": "r", "external_id": None, "statement": None})


def test_a_refused_appeal_changes_no_row(app, client, world):
    """The API answers the contract's refusal before it reads or writes anything."""

    def rows():
        db.session.rollback()
        return [db.session.scalar(select(func.count()).select_from(m)) for m in (Appeal, AuditEvent)]

    before = rows()
    response = client.post(
        "/api/v1/appeals",
        json={"report_external_id": "r", "statement": 7},
        headers={"Authorization": f"Bearer {world.console_token}"},
    )
    assert response.status_code == 400
    assert response.get_json()["error"] == {
        "code": "appeal_statement_invalid",
        "message": "Statement must be text of at most 5,000 characters.",
        "field": "statement",
    }
    assert rows() == before
