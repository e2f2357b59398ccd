from __future__ import annotations

from flask import g, jsonify
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from app.domain.clock import iso
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, Report
from app.services.cases.reports import intake_report
from app.services.lifecycle.receipt_intake import ResultToken, accept_async_result
from app.services.read.appeal_status import appeal_status

from ..decorators import integration_required
from ..json_input import request_json
from .blueprint import bp
from .contract import check_body
from .openapi import openapi_document


def json_body(operation_id: str):
    """The request's JSON body, as the operation's published schema accepts it.

    Args:
        operation_id: the OpenAPI ``operationId`` whose request schema applies.

    Raises:
        ApiError: 415 ``unsupported_media_type``; 400 ``invalid_json`` (also for an
            object that names a key twice); the contract's refusals (`check_body`).
    """
    body = request_json()
    check_body(operation_id, body)
    return body


@bp.route("/action-results", methods=["POST"])
@integration_required
def action_results():
    """A platform's later receipt for an action (SPEC API-1..4, FOUR-8)."""
    caller = g.integration_caller
    token = ResultToken(caller.token_id, caller.token_created_at, caller.token_standing_since)
    answer = accept_async_result(json_body("postActionResult"), g.integration.id, token=token)
    return jsonify(
        {"action_id": answer.proposal_id, "state": answer.state, "idempotent_replay": answer.idempotent_replay}
    ), 200


@bp.route("/reports", methods=["POST"])
@integration_required
def reports():
    """Report intake, idempotent by the platform's own report id; evidence kept as first received (REV-1)."""
    result = intake_report(json_body("postReport"), g.integration.id)
    answer = {
        "report_id": result.report_id,
        "public_reference": result.public_reference,
        "created": result.created,
        "evidence_digests": result.evidence_digests,
        "evidence_mismatch": result.evidence_mismatch,
    }
    if result.evidence_mismatch:
        answer["notice"] = "This report was received before; its evidence is kept as first received."
    return jsonify(answer), 201 if result.created else 200


@bp.route("/appeals", methods=["POST"])
@integration_required
def appeals():
    """An appeal the platform received from a user, against the report's latest
    decision; answered with the appeal as it is now (DSA-5: a repeat of a decided one
    carries its outcome notice). Refused after the complaint window (DSA-5)."""
    from app.services.cases.appeals import file_appeal
    from app.services.uow import Actor

    body = json_body("postAppeal")
    reference = body["report_external_id"]
    report_id = db.session.scalar(
        select(Report.id).where(Report.integration_id == g.integration.id, Report.external_id == reference)
    )
    if report_id is None:
        raise ApiError(404, "report_not_found", "No report with that external id.")
    result = file_appeal(
        report_id,
        statement=body.get("statement"),
        actor=Actor("service_identity", g.integration.id),
        installation_id=g.integration.installation_id,
        external_id=body.get("external_id"),
        integration_id=g.integration.id,
    )
    answer = appeal_status(result.appeal_id, integration_id=g.integration.id, created=result.created)
    return jsonify(answer), 201 if result.created else 200


@bp.route("/appeals/<path:appeal_id>", methods=["GET"])
@integration_required
def appeal(appeal_id: str):
    """One of this integration's appeals: state, outcome and outcome notice (DSA-5)."""
    return jsonify(appeal_status(appeal_id, integration_id=g.integration.id))


@bp.route("/actions/<path:action_id>", methods=["GET"])
@integration_required
def action_status(action_id: str):
    """The state of one of this integration's actions (other integrations: 404)."""
    with_report = select(ActionProposal).options(joinedload(ActionProposal.report))
    proposal = db.session.scalar(with_report.where(ActionProposal.id == action_id)) if len(action_id) <= 700 else None
    if proposal is None or proposal.report.integration_id != g.integration.id:
        raise ApiError(404, "action_result_unavailable", "This action is not available to this integration.")
    return jsonify(
        {
            "action_id": proposal.id,
            "operation_id": proposal.operation_id,
            "payload_digest": proposal.payload_digest,
            "action_code": proposal.action_code,
            "state": proposal.state,
            "delivery_cycle": proposal.delivery_cycle,
            "delivery_terminal": proposal.delivery_terminal,
            "last_error_code": proposal.last_error_code,
            "expires_at": iso(proposal.expires_at),
            "accepted_at": iso(proposal.accepted_at),
            "confirmed_at": iso(proposal.confirmed_at),
            "report_reference": proposal.report.public_reference,
        }
    )


@bp.route("/openapi.json", methods=["GET"])
def openapi():
    return jsonify(openapi_document())
