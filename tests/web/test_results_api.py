"""The async result API (API-1..4, RCPT-3) and the platform API's bad input."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, ActionReceiptRecord, AuditEvent, Integration, Report, WorkflowEventInbox
from app.services.admin.integrations import issue_token
from app.services.lifecycle.dispatch import deliver
from app.services.uow import Actor, unit_of_work

from .. import scripted as s
from ..builders import approve, decide_report, reload, set_row


@pytest.fixture
def accepted(app, world, scripted):
    """A proposal the platform accepted and will confirm later."""
    scripted(s.accepted())
    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    proposal = reload(proposal)
    assert proposal.state == "queued" and proposal.accepted_at
    return proposal


def body(proposal, **changes):
    value = {
        "action_id": proposal.id,
        "operation_id": proposal.operation_id,
        "payload_digest": proposal.payload_digest,
        "status": "applied",
    }
    value.update(changes)
    return {k: v for k, v in value.items() if v is not None}


def post(client, token, json=None, **kwargs):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post("/api/v1/action-results", json=json, headers=headers, **kwargs)


def state_of_world():
    """Rows a rejected request must leave untouched."""
    db.session.rollback()
    count = lambda m: db.session.scalar(select(func.count()).select_from(m))  # noqa: E731
    proposals = db.session.execute(select(ActionProposal.id, ActionProposal.state, ActionProposal.updated_at)).all()
    return (sorted(proposals), count(AuditEvent), count(ActionReceiptRecord), count(WorkflowEventInbox))


def test_async_applied_confirms_and_resolves(app, client, world, accepted):
    """API-4, RCPT-2: an accepted action is confirmed through the API."""
    response = post(client, world.console_token, body(accepted, provider_request_id="p-77"))
    assert response.status_code == 200
    assert response.get_json() == {"action_id": accepted.id, "state": "applied", "idempotent_replay": False}
    row = reload(accepted)
    assert row.state == "applied" and row.confirmed_at is not None
    assert db.session.get(WorkflowEventInbox, f"{accepted.id}:delivery-resolution") is not None
    audit = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "workflow.action_applied"))
    assert (audit.actor_type, audit.actor_id) == ("service_identity", world.integration_id)


def test_same_result_twice_is_a_replay_with_one_audit_row(app, client, world, accepted):
    """API-4, RCPT-3: the same receipt twice writes one audit row."""
    assert post(client, world.console_token, body(accepted)).status_code == 200
    before = state_of_world()
    again = post(client, world.console_token, body(accepted))
    assert again.status_code == 200 and again.get_json()["idempotent_replay"] is True
    assert state_of_world() == before
    assert (
        db.session.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.action == "workflow.action_applied")
        )
        == 1
    )


def test_audit_key_names_operation_cycle_and_receipt_digest(app, client, world, accepted):
    """RCPT-3: action-result:{operation}:{cycle}:{sha256 of receipt}."""
    post(client, world.console_token, body(accepted))
    key = db.session.scalar(select(AuditEvent.idempotency_key).where(AuditEvent.action == "workflow.action_applied"))
    prefix = f"action-result:{accepted.operation_id}:1:"
    assert key.startswith(prefix) and len(key) == len(prefix) + 64


def test_async_failed_non_terminal_schedules_a_retry(app, client, world, accepted):
    """RCPT-2: failed with terminal=false clears the acceptance and retries later."""
    response = post(
        client, world.console_token, body(accepted, status="failed", terminal=False, retry_after_seconds=60)
    )
    assert response.status_code == 200 and response.get_json()["state"] == "failed"
    row = reload(accepted)
    assert (row.delivery_terminal, row.accepted_at, row.confirmation_deadline_at) == (False, None, None)


@pytest.mark.parametrize(
    "payload,field",
    [
        ({}, "action_id"),
        ({"status": "applied"}, "action_id"),
        ({"action_id": "", "status": "applied"}, "action_id"),
        ({"action_id": "x" * 501, "status": "applied"}, "action_id"),
        ({"action_id": "a", "status": "accepted"}, "status"),
        ({"action_id": 5, "status": "applied"}, "action_id"),
        ([1, 2], None),
        ("applied", None),
    ],
)
def test_identity_and_status_are_required(app, client, world, accepted, payload, field):
    """API-1: 400 action_result_invalid naming the field at fault, nothing changed."""
    before = state_of_world()
    response = post(client, world.console_token, payload)
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "action_result_invalid"
    assert response.get_json()["error"].get("field") == field
    assert state_of_world() == before


def test_unknown_fields_are_ignored(app, client, world, accepted):
    """EDGE-2: a receipt with one field the contract does not know is recorded like the
    synchronous path records it (the unknown field is ignored)."""
    response = post(client, world.console_token, body(accepted, extra_field=1))
    assert response.status_code == 200 and response.get_json()["state"] == "applied"


def test_other_integration_gets_the_same_404_as_a_missing_action(app, client, world, accepted):
    """API-2: another integration's action is indistinguishable from a missing one."""
    with unit_of_work() as uow:
        other = Integration(installation_id=world.installation_id, name="Other", slug="other")
        uow.session.add(other)
        uow.commit()
    token = issue_token(other.id, label="t", actor=Actor.system()).token
    before = state_of_world()
    theirs = post(client, token, body(accepted))
    missing = post(client, token, body(accepted, action_id="no-such-action"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.get_json() == missing.get_json()
    assert theirs.get_json()["error"]["code"] == "action_result_unavailable"
    assert state_of_world() == before


@pytest.mark.parametrize("changes", [{"operation_id": "action:other"}, {"payload_digest": "sha256:" + "0" * 64}])
def test_identity_mismatch_is_409(app, client, world, accepted, changes):
    """API-3"""
    before = state_of_world()
    response = post(client, world.console_token, body(accepted, **changes))
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "action_result_identity_mismatch"
    assert state_of_world() == before


@pytest.mark.parametrize(
    "changes",
    [{"retry_after_seconds": 0}, {"error_code": "bad code"}, {"terminal": "no"}, {"provider_request_id": "x" * 501}],
)
def test_other_receipt_errors_are_400(app, client, world, accepted, changes):
    """API-3: other receipt errors are 400 with their code."""
    response = post(client, world.console_token, body(accepted, status="failed", **changes))
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "action_result_invalid"


def test_not_awaiting_a_result_is_409(app, client, world):
    """API-4: a proposal still awaiting approval is not awaiting a platform result."""
    proposal = decide_report(world)
    response = post(client, world.console_token, body(proposal))
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "action_result_terminal"


def test_other_status_after_terminal_is_409(app, client, world, accepted):
    """API-4: a failed result after applied is refused."""
    post(client, world.console_token, body(accepted))
    response = post(client, world.console_token, body(accepted, status="failed"))
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "action_result_terminal"


def test_lost_race_is_409_conflict(app, client, world, accepted, monkeypatch):
    """API-4: when the guarded write loses to another writer: action_result_conflict."""
    import app.services.lifecycle.receipt_intake as receipts

    monkeypatch.setattr(receipts, "move_loaded", lambda *args, **kwargs: False)
    response = post(client, world.console_token, body(accepted))
    assert response.status_code == 409 and response.get_json()["error"]["code"] == "action_result_conflict"
    assert reload(accepted).state == "queued"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer sct_" + "x" * 300},
    ],
)
def test_missing_or_wrong_token_is_401(app, client, world, accepted, headers):
    before = state_of_world()
    response = client.post("/api/v1/action-results", json=body(accepted), headers=headers)
    assert response.status_code == 401 and response.get_json()["error"]["code"] == "unauthorized"
    assert state_of_world() == before


def test_revoked_token_is_refused(app, client, world, accepted):
    from app.models import IntegrationToken
    from app.services.admin.integrations import revoke_token

    token_id = db.session.scalar(select(IntegrationToken.id))
    revoke_token(token_id, installation_id=world.installation_id, actor=Actor.system())
    assert post(client, world.console_token, body(accepted)).status_code == 401


def test_a_result_that_names_a_key_twice_is_refused(app, client, world, accepted):
    """API-1, RCPT-1 (second break-it pass): ``"status": "applied", "status": "failed"`` says
    two things; a gateway reading the first and the console the last would disagree. 400
    ``invalid_json``, and the proposal is untouched."""
    import json as json_module

    headers = {"Authorization": f"Bearer {world.console_token}", "Content-Type": "application/json"}
    text = json_module.dumps(body(accepted))[:-1] + ', "status": "failed"}'
    before = reload(accepted).state
    response = client.post("/api/v1/action-results", data=text, headers=headers)
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "invalid_json"
    assert "status" in response.get_json()["error"]["message"]
    db.session.rollback()
    assert reload(accepted).state == before


def test_not_json_is_refused(app, client, world, accepted):
    headers = {"Authorization": f"Bearer {world.console_token}"}
    wrong_type = client.post("/api/v1/action-results", data="status=applied", headers=headers)
    assert wrong_type.status_code == 415
    broken = client.post(
        "/api/v1/action-results", data="{not json", headers={**headers, "Content-Type": "application/json"}
    )
    assert broken.status_code == 400 and broken.get_json()["error"]["code"] == "invalid_json"
    huge = client.post(
        "/api/v1/action-results",
        data="[" + "1," * 600_000 + "1]",
        headers={**headers, "Content-Type": "application/json"},
    )
    assert huge.status_code == 413


def test_status_endpoint_shows_only_own_actions(app, client, world, accepted):
    headers = {"Authorization": f"Bearer {world.console_token}"}
    response = client.get(f"/api/v1/actions/{accepted.id}", headers=headers)
    assert response.status_code == 200 and response.get_json()["state"] == "queued"
    set_row(Report, accepted.report_id, integration_id=_other_integration(world))
    assert client.get(f"/api/v1/actions/{accepted.id}", headers=headers).status_code == 404


def _other_integration(world) -> str:
    with unit_of_work() as uow:
        other = Integration(installation_id=world.installation_id, name="Other", slug="other2")
        uow.session.add(other)
        uow.commit()
        return other.id


def test_openapi_document_lists_the_api(app, client):
    document = client.get("/api/v1/openapi.json").get_json()
    assert document["openapi"] == "3.1.0"
    assert {"/action-results", "/reports", "/actions/{action_id}"} <= set(document["paths"])


# -- FOUR-8: a result comes only from who may speak ---------------------------------


@pytest.fixture
def in_backoff(app, world, scripted):
    """A proposal whose first attempt got a 503: waiting in backoff, not terminal."""
    scripted(s.http_status(503))
    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    proposal = reload(proposal)
    assert (proposal.state, proposal.delivery_terminal, proposal.delivery_attempt_count) == ("failed", False, 1)
    return proposal


def audit_rows(action: str) -> list[AuditEvent]:
    db.session.rollback()
    return list(db.session.scalars(select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.seq)))


def test_four8_a_token_created_after_the_first_attempt_cannot_confirm(app, client, world, in_backoff, caplog):
    """FOUR-8: a token one admin issued after the action's first attempt posts
    ``applied``: 403 ``result_token_too_new``, the proposal, its receipts and the run
    unchanged; the refusal is audited (``action.result_refused``, naming the token)
    and logged. The token that existed before the attempt still speaks for it."""
    new_token = issue_token(world.integration_id, label="late", actor=Actor.system())
    proposals_before, audits_before, receipts_before, inbox_before = state_of_world()
    with caplog.at_level("WARNING"):
        refused = post(client, new_token.token, body(in_backoff))
    assert refused.status_code == 403
    assert refused.get_json()["error"]["code"] == "result_token_too_new"
    proposals, audits, receipts, inbox = state_of_world()
    assert (proposals, receipts, inbox) == (proposals_before, receipts_before, inbox_before)
    assert reload(in_backoff).state == "failed"
    [event] = audit_rows("action.result_refused")
    assert (event.target_id, event.actor_type) == (in_backoff.id, "service_identity")
    assert event.actor_id == world.integration_id
    assert event.details["token_id"] == new_token.token_id and event.details["status"] == "applied"
    assert "result_token_too_new" in caplog.text
    again = post(client, new_token.token, body(in_backoff))  # the same refusal again: one audit row
    assert again.status_code == 403 and len(audit_rows("action.result_refused")) == 1
    assert post(client, new_token.token, body(in_backoff, status="failed")).status_code == 403
    accepted = post(client, world.console_token, body(in_backoff))
    assert accepted.status_code == 200 and accepted.get_json()["state"] == "applied"


def test_four8_a_token_older_than_the_first_attempt_may_confirm(app, client, world, accepted):
    """FOUR-8: a second token issued before the action was first sent may confirm it."""
    from app.models import IntegrationToken

    older = issue_token(world.integration_id, label="spare", actor=Actor.system())
    first_attempt = db.session.scalar(select(func.min(IntegrationToken.created_at)))
    set_row(IntegrationToken, older.token_id, created_at=first_attempt, standing_since=first_attempt)
    response = post(client, older.token, body(accepted))
    assert response.status_code == 200 and response.get_json()["state"] == "applied"


def _console_token_id(world) -> str:
    from app.models import IntegrationToken

    db.session.rollback()
    return db.session.scalar(
        select(IntegrationToken.id).where(IntegrationToken.integration_id == world.integration_id)
    )


def test_four8_a_rotation_that_succeeds_the_old_token_may_confirm(app, client, world, in_backoff):
    """FOUR-8: one admin revokes the token the action was sent under; the replacement a
    second admin approved, naming it as the token it succeeds, takes over its standing
    and may confirm the action sent before. A replacement that succeeds nothing is
    still refused (403 ``result_token_too_new``)."""
    from app.models import IntegrationToken
    from app.services.admin.integrations import revoke_token
    from app.services.admin.token_changes import propose_token

    from ..builders import approve_change

    old_id = _console_token_id(world)
    old = db.session.get(IntegrationToken, old_id)
    old_standing = old.standing_since
    assert old_standing == old.created_at  # a token's standing defaults to its creation
    revoke_token(old_id, installation_id=world.installation_id, actor=Actor("operator", world.user("admin").id))
    plain = propose_token(world.user("admin"), world.integration_id, "without succession")
    successor = propose_token(world.user("admin"), world.integration_id, "rotated", succeeds=[old_id])
    approve_change(world, plain)
    result = approve_change(world, successor)
    db.session.rollback()
    row = db.session.get(IntegrationToken, result["token_id"])
    assert row.standing_since == old_standing and row.created_at > old_standing
    refused = post(client, plain.shown_once["token"], body(in_backoff))
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "result_token_too_new"
    confirmed = post(client, successor.shown_once["token"], body(in_backoff))
    assert confirmed.status_code == 200 and confirmed.get_json()["state"] == "applied"


def test_four8_a_token_succeeds_only_tokens_of_its_own_integration(app, client, world):
    """FOUR-8: naming another integration's token, an unknown id or not a list as the
    token a new one succeeds: 400 ``token_succeeds_invalid``, no change stored."""
    from app.models import ConfigChange
    from app.services.admin.integrations import create_integration
    from app.services.admin.token_changes import propose_token

    from ..builders import approve_change

    other_id = create_integration(world.user("admin"), name="Other", slug="other", default_queue_id=None)
    other_token = propose_token(world.user("admin"), other_id, "theirs")
    other_token_id = approve_change(world, other_token)["token_id"]
    db.session.rollback()
    before = db.session.scalar(select(func.count()).select_from(ConfigChange))
    for succeeds in ([other_token_id], ["tok_missing"], "tok_x", [_console_token_id(world)] * 2 + [7]):
        with pytest.raises(ApiError) as raised:
            propose_token(world.user("admin"), world.integration_id, "mine", succeeds=succeeds)
        assert (raised.value.status, raised.value.code) == (400, "token_succeeds_invalid"), succeeds
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(ConfigChange)) == before


# -- a platform contradicting itself is seen ------------------------------------------


def test_a_contradicting_result_is_recorded_while_the_state_holds(app, client, world, accepted, caplog):
    """API-4, RCPT-3: applied, then ``failed``, then applied again. The state stays
    applied (409, then an idempotent replay), and the contradicting ``failed`` is
    recorded: an ``action.result_contradicted`` audit row with what was claimed, a
    receipt kept as not applied, a warning log line and a note on the proposal page.
    The same contradiction sent twice is recorded once."""
    from ..builders import login

    assert post(client, world.console_token, body(accepted)).status_code == 200
    with caplog.at_level("WARNING"):
        contradicted = post(client, world.console_token, body(accepted, status="failed", error_code="gone"))
    assert contradicted.status_code == 409
    assert contradicted.get_json()["error"]["code"] == "action_result_terminal"
    assert reload(accepted).state == "applied"
    [event] = audit_rows("action.result_contradicted")
    assert event.target_id == accepted.id and event.actor_id == world.integration_id
    assert (event.details["claimed_status"], event.details["state"]) == ("failed", "applied")
    assert event.details["receipt"]["error_code"] == "gone"
    assert "contradict" in caplog.text and accepted.id in caplog.text
    db.session.rollback()
    kept = db.session.scalars(
        select(ActionReceiptRecord).where(ActionReceiptRecord.proposal_id == accepted.id)
    ).all()
    assert sorted((r.status, r.applied_to_proposal) for r in kept) == [
        ("accepted", True),
        ("applied", True),
        ("failed", False),
    ]
    again = post(client, world.console_token, body(accepted, status="failed", error_code="gone"))
    assert again.status_code == 409 and len(audit_rows("action.result_contradicted")) == 1
    replay = post(client, world.console_token, body(accepted))
    assert replay.status_code == 200 and replay.get_json() == {
        "action_id": accepted.id,
        "state": "applied",
        "idempotent_replay": True,
    }
    assert reload(accepted).state == "applied"
    login(client, "reviewer@example.com")
    page = client.get(f"/proposals/{accepted.id}").get_data(as_text=True)
    assert 'id="result-contradictions"' in page and "contradicted" in page
    assert "reported <strong>failed</strong>" in page


def test_a_result_field_over_its_limit_is_a_400_naming_the_field(app, client, world, accepted):
    """API-1, API-3: a ``provider_request_id`` over 500 characters (or another bad field)
    answers 400 ``action_result_invalid`` naming the field; nothing changes."""
    before = state_of_world()
    for changes, field in (
        ({"provider_request_id": "x" * 501}, "provider_request_id"),
        ({"retry_after_seconds": 0}, "retry_after_seconds"),
        ({"error_code": "bad code"}, "error_code"),
        ({"terminal": "no"}, "terminal"),
    ):
        response = post(client, world.console_token, body(accepted, status="failed", **changes))
        assert response.status_code == 400
        error = response.get_json()["error"]
        assert (error["code"], error.get("field")) == ("action_result_invalid", field)
        assert field in error["message"]
    assert state_of_world() == before
