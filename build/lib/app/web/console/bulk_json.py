"""Bulk batches as console JSON (SPEC BULK-1..5, BULK-9), for operators' scripts.

Why here and not under ``/api/v1``: that API speaks for platforms only — integration
bearer tokens, exempt from CSRF because no cookie authenticates there. Letting an
operator's session in would make every bulk write (an approval over thousands of
subjects) forgeable from another site. So these routes are the console's: the
operator's session, the CSRF token in ``X-CSRFToken`` (every console page carries
it), JSON bodies, JSON answers (send ``Accept: application/json`` so that a refusal
before the view — sign-in, CSRF — is JSON too). Every refusal is
``{"error": {code, message, field?}}``; a refused selection adds ``lines``.
The pages (``/bulk``) call the same services.
"""

from __future__ import annotations

from functools import wraps
from typing import Any

from flask import jsonify, request
from flask_login import current_user

from app.domain.clock import iso
from app.domain.errors import ApiError
from app.extensions import db
from app.models import BulkBatch
from app.services.bulk import batch_approval, batch_items, dry_runs, progress, submission

from ..decorators import role_required
from ..json_input import request_json
from .blueprint import bp

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")
MAKER_ROLES = ("moderator", "reviewer", "admin")


def _refusal(error: ApiError):
    body = error.as_dict()
    lines = getattr(error, "lines", None)
    if lines is not None:  # BULK-1: each refused line with its code
        body["lines"] = [
            {"line": line.line, "code": line.code, "message": line.message, "excerpt": line.excerpt} for line in lines
        ]
    return jsonify(body), error.status


def json_view(view):
    """Answer the view's `ApiError` as JSON whatever the client accepts (never a page)."""

    @wraps(view)
    def wrapper(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except ApiError as error:
            db.session.rollback()
            return _refusal(error)

    return wrapper


def json_object(*required: str) -> dict[str, Any]:
    """The request's JSON object, with `required` keys present.

    Raises:
        ApiError: 415 ``unsupported_media_type``; 400 ``invalid_json`` (not JSON, not
            an object, a key named twice, a value the console does not store);
            400 ``field_missing`` naming the first missing key.
    """
    body = request_json()
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "The body is not a JSON object.")
    for key in required:
        if key not in body:
            raise ApiError(400, "field_missing", f"The body needs {key}.", key)
    return body


def _text(body: dict[str, Any], key: str) -> str:
    value = body[key]
    if not isinstance(value, str):
        raise ApiError(400, "field_invalid", f"{key} is a string.", key)
    return value


def batch_json(batch: BulkBatch) -> dict[str, Any]:
    """A batch for a JSON client, with its ledger (BULK-6) once it has items proposed."""
    book = progress.ledger(db.session, batch)
    return {
        "id": batch.id,
        "public_reference": batch.public_reference,
        "kind": batch.kind,
        "state": batch.state,
        "source": (batch.selection or {}).get("source"),
        "action": {
            "workflow_version_id": batch.workflow_version_id,
            "node_id": batch.node_id,
            "action_code": batch.action_code,
            "decision_code": batch.decision_code,
        },
        "reason": batch.reason,
        "maker_id": batch.maker_id,
        "approved_by": batch.approved_by,
        "counts": batch.counts,
        "item_count": batch.item_count,
        "dry_run_digest": batch.dry_run_digest,
        "batch_digest": batch.batch_digest,
        "drift_share": batch.drift_share,
        "expires_at": iso(batch.expires_at),
        "submitted_at": iso(batch.submitted_at),
        "approved_at": iso(batch.approved_at),
        "finished_at": iso(batch.finished_at),
        "ledger": {
            **{str(name): count for name, count in book.counts.items()},
            "total": book.total,
            "adds_up": book.adds_up,
            "done_share": book.done_share,
        },
    }


def _page_bound(name: str, default: int, maximum: int) -> int:
    value = request.args.get(name, str(default))
    if not (value.isascii() and value.isdigit() and len(value) <= 9) or not 0 <= int(value) <= maximum:
        raise ApiError(400, "field_invalid", f"{name} is a whole number from 0 to {maximum:,}.", name)
    return int(value)


def _items(batch_id: str, offset: int, limit: int) -> list[dict[str, Any]]:
    return [
        {
            "position": item.position,
            "subject_reference": item.subject_reference,
            "kind": item.kind,
            "line": item.line,
            "outcome": item.outcome,
            "detail": item.detail,
            "proposal_id": item.proposal_id,
            "skip_code": item.skip_code,
        }
        for item in batch_items.items_page(db.session, batch_id, offset=offset, limit=limit)
    ]


@bp.route("/bulk-batches", methods=["POST"])
@role_required(*MAKER_ROLES)
@json_view
def bulk_batch_create():
    """A dry run (BULK-1, BULK-2, BULK-5): body {selection, action_key, decision_code,
    reason}; 201 {id, counts, dry_run_digest}; 400 with ``lines`` for refused lines."""
    body = json_object("selection", "action_key", "decision_code", "reason")
    batch_id = dry_runs.start_dry_run(
        current_user,
        selection=body["selection"],
        action_key=body["action_key"],
        decision_code=body["decision_code"],
        reason=body["reason"],
    )
    batch = db.session.get(BulkBatch, batch_id)
    return jsonify({"id": batch.id, "counts": batch.counts, "dry_run_digest": batch.dry_run_digest}), 201


@bp.route("/bulk-batches/<batch_id>", methods=["GET"])
@role_required(*VIEW_ROLES)
@json_view
def bulk_batch_json(batch_id: str):
    """A batch with its ledger and a page of items (``offset``, ``limit`` ≤ 1,000)."""
    offset = _page_bound("offset", 0, 10_000_000)
    limit = _page_bound("limit", 100, batch_items.MAX_PAGE)
    batch = submission.load_batch(db.session, current_user, batch_id)
    return jsonify({**batch_json(batch), "items": _items(batch.id, offset, limit)})


@bp.route("/bulk-batches/<batch_id>/submit", methods=["POST"])
@role_required(*MAKER_ROLES)
@json_view
def bulk_batch_submit_json(batch_id: str):
    """Submit the dry run reviewed (BULK-3): body {dry_run_digest}; {id, state, batch_digest}."""
    submission.load_batch(db.session, current_user, batch_id)  # 404 before the body
    digest = _text(json_object("dry_run_digest"), "dry_run_digest")
    batch_digest = submission.submit_batch(current_user, batch_id, digest)
    return jsonify({"id": batch_id, "state": _state(batch_id), "batch_digest": batch_digest})


@bp.route("/bulk-batches/<batch_id>/approve", methods=["POST"])
@role_required(*MAKER_ROLES)
@json_view
def bulk_batch_approve_json(batch_id: str):
    """Approve the batch by its digest (BULK-3, BULK-4): body {batch_digest};
    {id, state, approved, skipped}."""
    submission.load_batch(db.session, current_user, batch_id)
    digest = _text(json_object("batch_digest"), "batch_digest")
    result = batch_approval.approve_batch(current_user, batch_id, digest)
    return jsonify({"id": batch_id, "state": _state(batch_id), **result})


@bp.route("/bulk-batches/<batch_id>/reject", methods=["POST"])
@role_required(*MAKER_ROLES)
@json_view
def bulk_batch_reject_json(batch_id: str):
    """Reject the batch (BULK-3): body {batch_digest, reason}; {id, state}."""
    submission.load_batch(db.session, current_user, batch_id)
    body = json_object("batch_digest", "reason")
    batch_approval.reject_batch(current_user, batch_id, _text(body, "batch_digest"), body["reason"])
    return jsonify({"id": batch_id, "state": _state(batch_id)})


def _state(batch_id: str) -> str:
    db.session.rollback()
    return db.session.get(BulkBatch, batch_id).state
