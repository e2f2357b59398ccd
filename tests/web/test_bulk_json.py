"""Bulk batches as console JSON (SPEC BULK-1, BULK-3, BULK-5, BULK-6): an operator's
session and CSRF token, JSON bodies and answers, every refusal a code, nothing stored."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import BulkBatch, BulkCap, BulkItem
from app.services.bulk.actions import bulk_actions
from app.services.uow import unit_of_work

from ..builders import login, run_worker

JSON = {"Accept": "application/json"}


def _session(app, team, name: str):
    client = app.test_client()
    token = login(client, team.user(name).email)
    return client, {**JSON, "X-CSRFToken": token}


def _dry_run_body(team, lines) -> dict:
    action = bulk_actions(db.session, team.installation_id)[0]
    return {
        "selection": {"source": "list", "text": "\n".join(lines)},
        "action_key": action.key,
        "decision_code": action.decision_code,
        "reason": "spam network",
    }


def _batches() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(BulkBatch))


def test_bulk_3_json_dry_run_submit_and_a_second_reviewer_approves(app, team):
    """BULK-2, BULK-3, BULK-6: a moderator's dry run (201 with counts and digest) and
    submission; a reviewer's approval by the batch digest (a wrong digest: 409, nothing
    written); the worker applies every item once and the ledger adds up."""
    moderator, headers = _session(app, team, "moderator")
    created = moderator.post("/bulk-batches", json=_dry_run_body(team, [f"post:{n}" for n in range(5)]),
                             headers=headers)
    assert created.status_code == 201, created.get_data(as_text=True)
    body = created.get_json()
    assert body["counts"]["would_act"] == 5 and body["dry_run_digest"].startswith("sha256:")
    batch_id = body["id"]
    shown = moderator.get(f"/bulk-batches/{batch_id}?limit=2", headers=JSON).get_json()
    assert shown["state"] == "dry_run" and [item["position"] for item in shown["items"]] == [0, 1]
    submitted = moderator.post(f"/bulk-batches/{batch_id}/submit",
                               json={"dry_run_digest": body["dry_run_digest"]}, headers=headers)
    assert submitted.status_code == 200, submitted.get_data(as_text=True)
    batch_digest = submitted.get_json()["batch_digest"]
    assert submitted.get_json()["state"] == "submitted"
    refused = moderator.post(f"/bulk-batches/{batch_id}/approve", json={"batch_digest": batch_digest}, headers=headers)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "bulk_approval_refused"

    reviewer, reviewer_headers = _session(app, team, "reviewer")
    wrong = reviewer.post(f"/bulk-batches/{batch_id}/approve", json={"batch_digest": "sha256:" + "0" * 64},
                          headers=reviewer_headers)
    assert wrong.status_code == 409 and wrong.get_json()["error"]["code"] == "bulk_batch_digest_mismatch"
    approved = reviewer.post(f"/bulk-batches/{batch_id}/approve", json={"batch_digest": batch_digest},
                             headers=reviewer_headers)
    assert approved.status_code == 200 and approved.get_json()["approved"] == 5, approved.get_data(as_text=True)
    run_worker(app)
    final = reviewer.get(f"/bulk-batches/{batch_id}", headers=JSON).get_json()
    assert final["state"] == "completed" and final["ledger"]["applied"] == 5 and final["ledger"]["adds_up"]
    assert all(item["proposal_id"] for item in final["items"])
    assert len(team.demo_platform.state.effects) == 5


def test_bulk_1_json_refused_lines_answer_400_with_each_line_and_store_nothing(app, team):
    """BULK-1: bad lines of a pasted list are answered line by line (400, ``lines``), nothing stored."""
    moderator, headers = _session(app, team, "moderator")
    response = moderator.post("/bulk-batches", json=_dry_run_body(team, ["post:1", "not a reference!", "post:1"]),
                              headers=headers)
    assert response.status_code == 400, response.get_data(as_text=True)
    lines = response.get_json()["lines"]
    assert [line["line"] for line in lines] == [2, 3]
    assert {line["code"] for line in lines} == {"bulk_reference_invalid", "bulk_subject_duplicate"}
    assert _batches() == 0


def test_bulk_5_json_dry_run_over_the_cap_is_refused(app, team):
    """BULK-5: a selection over the role's cap answers bulk_selection_over_cap, nothing stored."""
    with unit_of_work() as uow:  # the cap's four-eyes change is tested in tests/services/test_bulk_caps.py
        uow.session.add(BulkCap(installation_id=team.installation_id, role="moderator", max_items=2))
        uow.commit()
    moderator, headers = _session(app, team, "moderator")
    response = moderator.post("/bulk-batches", json=_dry_run_body(team, ["post:1", "post:2", "post:3"]),
                              headers=headers)
    assert response.status_code == 400
    assert "bulk_selection_over_cap" in {line["code"] for line in response.get_json()["lines"]}
    assert _batches() == 0 and db.session.scalar(select(func.count()).select_from(BulkItem)) == 0


def test_bulk_3_json_a_reviewer_rejects_with_a_reason(app, team):
    """BULK-3: a second reviewer rejects the submitted batch by its digest with a reason."""
    maker, headers = _session(app, team, "reviewer2")
    batch_id = maker.post("/bulk-batches", json=_dry_run_body(team, ["post:9"]), headers=headers).get_json()["id"]
    digest = db.session.get(BulkBatch, batch_id).dry_run_digest
    batch_digest = maker.post(f"/bulk-batches/{batch_id}/submit", json={"dry_run_digest": digest},
                              headers=headers).get_json()["batch_digest"]
    reviewer, reviewer_headers = _session(app, team, "reviewer")
    short = reviewer.post(f"/bulk-batches/{batch_id}/reject", json={"batch_digest": batch_digest, "reason": ""},
                          headers=reviewer_headers)
    assert short.status_code == 400 and short.get_json()["error"]["code"] == "bulk_reason_invalid"
    rejected = reviewer.post(f"/bulk-batches/{batch_id}/reject",
                             json={"batch_digest": batch_digest, "reason": "not a network"}, headers=reviewer_headers)
    assert rejected.status_code == 200 and rejected.get_json()["state"] == "rejected"


BAD = [
    ("post", "/bulk-batches", b"not json", 400, "invalid_json"),
    ("post", "/bulk-batches", b"[1, 2]", 400, "invalid_json"),
    ("post", "/bulk-batches", b'{"reason": "a", "reason": "b"}', 400, "invalid_json"),
    ("post", "/bulk-batches", b"{}", 400, "field_missing"),
    ("post", "/bulk-batches", b'{"selection": 1, "action_key": 2, "decision_code": null, "reason": []}', 400, None),
    ("post", "/bulk-batches", b'{"selection": {"source": "list", "text": 5}, "action_key": "x", '
     b'"decision_code": "y", "reason": "why not"}', 400, "bulk_action_invalid"),
    ("post", "/bulk-batches/blk_nope/submit", b'{"dry_run_digest": 7}', 404, "bulk_batch_not_found"),
    ("post", "/bulk-batches/blk_nope/submit", b'{"dry_run_digest": "sha256:x"}', 404, "bulk_batch_not_found"),
    ("post", "/bulk-batches/blk_nope/approve", b'{"batch_digest": "sha256:x"}', 404, "bulk_batch_not_found"),
    ("post", "/bulk-batches/blk_nope/reject", b'{"batch_digest": "x", "reason": 5}', None, None),
    ("get", "/bulk-batches/" + "x" * 900, None, 404, "bulk_batch_not_found"),
    ("get", "/bulk-batches/blk_nope?limit=%C2%B2", None, 400, "field_invalid"),
]


@pytest.mark.parametrize(("method", "url", "data", "status", "code"), BAD)
def test_bulk_1_json_bad_input_is_refused_with_a_code_never_a_500(app, team, method, url, data, status, code):
    """BULK-1: bad bodies, types, ids and parameters are each refused with a JSON code; nothing stored."""
    moderator, headers = _session(app, team, "reviewer2")
    kwargs = {"data": data, "content_type": "application/json"} if data is not None else {}
    response = getattr(moderator, method)(url, headers=headers, **kwargs)
    error = response.get_json()["error"]
    assert response.status_code < 500 and error["code"] and error["message"]
    assert status is None or response.status_code == status, response.get_data(as_text=True)
    assert code is None or error["code"] == code
    assert _batches() == 0


def test_bulk_1_json_writes_need_the_session_and_its_csrf_token(app, team, client):
    """BULK-1: without a session a JSON client gets 401; without the CSRF token 400 csrf_invalid."""
    body = _dry_run_body(team, ["post:1"])
    assert client.post("/bulk-batches", json=body, headers=JSON).status_code in (400, 401)
    moderator, _ = _session(app, team, "moderator")
    response = moderator.post("/bulk-batches", json=body, headers=JSON)
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "csrf_invalid"
    assert moderator.get("/bulk-batches/blk_nope").status_code == 404
    assert _batches() == 0
