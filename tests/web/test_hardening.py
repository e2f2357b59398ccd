"""Regressions from trying to break the console: every one answered 500 or let
something through before."""

from __future__ import annotations

import base64
import io
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, Appeal, ComponentVersion, Decision
from app.services.cases.appeals import decide_appeal, file_appeal, redact_rationale
from app.services.lifecycle.dispatch import deliver
from app.services.uow import Actor

from ..builders import approve, decide_report, login, set_row


def post_json(client, world, path, raw: str):
    return client.post(
        path, data=raw, headers={"Authorization": f"Bearer {world.console_token}", "Content-Type": "application/json"}
    )


@pytest.mark.parametrize(
    "raw",
    [
        '{"external_id": NaN, "targets": []}',
        '{"external_id": "e", "targets": [{"reference": "post:1"}], "summary": "\\ud800"}',
        '{"external_id": "e\\u0000", "targets": [{"reference": "post:1"}]}',
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 40 + "1" + "}" * 40,
    ],
)
def test_api_refuses_json_it_cannot_store(app, client, world, raw):
    response = post_json(client, world, "/api/v1/reports", raw)
    assert response.status_code in (400, 413) and response.get_json()["error"]["code"] in (
        "invalid_json",
        "request_too_large",
    )


def test_a_file_where_text_is_expected_is_ignored(app, client, world):
    token = login(client, "reviewer@example.com")
    proposal = decide_report(world)
    response = client.post(
        f"/proposals/{proposal.id}/decision",
        content_type="multipart/form-data",
        data={
            "decision": "approved",
            "payload_digest": proposal.payload_digest,
            "idempotency_key": "k",
            "csrf_token": token,
            "reason": (io.BytesIO(b"x"), "reason.txt"),
        },
    )
    from app.models import ActionApproval

    assert response.status_code == 303  # the upload is not read into the text field
    assert db.session.scalar(select(ActionApproval.reason)) is None


@pytest.mark.parametrize(
    "cursor_text", ["0001-01-01T00:00:00+14:00|a", "9999-12-31T23:59:59-14:00|x", "2026-01-01T00:00:00Z|\x00"]
)
def test_a_hostile_cursor_reads_as_the_first_page(app, client, world, cursor_text):
    login(client, "reviewer@example.com")
    cursor = base64.urlsafe_b64encode(cursor_text.encode()).decode()
    assert client.get(f"/proposals?after={cursor}").status_code == 200


def test_nul_in_a_form_or_query_is_400(app, client, world):
    token = login(client, "moderator@example.com")
    assert client.get("/proposals?action=%00").status_code == 400
    response = client.post(
        f"/reports/{world.report_ids[0]}/decisions",
        data={"decision_code": "remove_content", "rationale": "a\x00b", "csrf_token": token},
    )
    assert response.status_code == 400
    assert db.session.scalar(select(func.count()).select_from(Decision)) == 0


def test_double_submitted_decision_records_once(app, client, world):
    token = login(client, "moderator@example.com")
    form = {"decision_code": "remove_content", "idempotency_key": "form-render-1", "csrf_token": token}
    assert client.post(f"/reports/{world.report_ids[0]}/decisions", data=form).status_code == 303
    assert client.post(f"/reports/{world.report_ids[0]}/decisions", data=form).status_code == 303
    assert db.session.scalar(select(func.count()).select_from(Decision)) == 1
    assert db.session.scalar(select(func.count()).select_from(ActionProposal)) == 1


def decided_and_enforced(world):
    proposal = decide_report(world)
    approve(world, proposal)
    deliver(proposal.id)
    return proposal


def test_concurrent_appeals_open_one(app, world, platform):
    decided_and_enforced(world)

    def file(n):
        with app.app_context():
            try:
                return file_appeal(
                    world.report_ids[0],
                    statement="",
                    actor=Actor.system(),
                    installation_id=world.installation_id,
                    external_id=f"a-{n}",
                ).appeal_id
            except ApiError as error:
                return error.code

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(file, range(8)))
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Appeal)) == 1
    assert set(results) - {r for r in results if r.startswith("apl_")} <= {"report_not_appealable"}


def test_uninvolved_admins_alone_may_redact(app, world, platform):
    """Redaction edits the case record: no maker of either decision may do it (it no
    longer stops a correction, FOUR-7)."""
    decided_and_enforced(world)
    appeal_id = file_appeal(
        world.report_ids[0], statement="", actor=Actor.system(), installation_id=world.installation_id
    ).appeal_id
    result = decide_appeal(appeal_id, outcome="reversed", rationale="r", operator=world.user("admin"))
    with pytest.raises(ApiError) as caught:
        redact_rationale(result.appeal_decision_id, operator=world.user("reviewer2"))
    assert caught.value.code == "forbidden"
    with pytest.raises(ApiError) as caught:
        redact_rationale(result.appeal_decision_id, operator=world.user("admin"))  # made the appeal decision
    assert caught.value.code == "maker_checker_violation"
    with pytest.raises(ApiError) as caught:
        redact_rationale(result.appeal_decision_id, operator=world.user("admin"), appeal_id="apl_other")
    assert caught.value.code == "appeal_decision_not_found"


def test_a_self_referencing_schema_fails_the_action_cleanly(app, world):
    """PREP-4: a schema that cannot be evaluated rejects the payload instead of crashing the run."""
    set_row(ComponentVersion, world.components["takedown"], input_schema={"$ref": "#"})
    decide_report(world)
    from app.models import WorkflowRun

    run = db.session.scalar(select(WorkflowRun))
    assert (run.state, run.last_error_code) == ("failed", "action_payload_schema_invalid")


def test_an_operation_path_cannot_climb_out_of_the_base_url(app, world, scripted):
    """DLV-2"""
    from .. import scripted as s

    script = scripted(s.applied())
    proposal = decide_report(world)
    approve(world, proposal)
    set_row(ComponentVersion, world.components["takedown"], implementation_reference="POST /../admin/delete")
    assert deliver(proposal.id).error_code == "action_component_operation_invalid"
    assert script.requests == []
