"""Property-based fuzzing of the platform API: whatever JSON arrives, the answer is a
documented 4xx (or a 2xx for a valid request), never a 5xx, and a rejected request
changes no row."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.extensions import db
from app.models import ActionProposal, AuditEvent, Report, ReportTarget

from ..builders import approve, decide_report

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=20), children, max_size=4),
    max_leaves=12,
)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def fingerprint():
    db.session.rollback()
    return (
        sorted(db.session.execute(select(ActionProposal.id, ActionProposal.state, ActionProposal.updated_at)).all()),
        db.session.scalar(select(func.count()).select_from(AuditEvent)),
        db.session.scalar(select(func.count()).select_from(Report)),
        db.session.scalar(select(func.count()).select_from(ReportTarget)),
    )


def result_like(proposal):
    fields = st.fixed_dictionaries(
        {},
        optional={
            "action_id": st.sampled_from([proposal.id, "x", ""]) | st.text(max_size=600) | json_values,
            "operation_id": st.sampled_from([proposal.operation_id]) | json_values,
            "payload_digest": st.sampled_from([proposal.payload_digest]) | json_values,
            "status": st.sampled_from(["applied", "failed", "accepted", "bogus"]) | json_values,
            "terminal": json_values,
            "retry_after_seconds": json_values,
            "error_code": json_values,
            "provider_request_id": json_values,
            "unexpected": json_values,
        },
    )
    return fields | json_values


def test_action_results_never_500(app, client, world):
    proposal = decide_report(world)
    approve(world, proposal)
    headers = {"Authorization": f"Bearer {world.console_token}"}

    @FUZZ
    @given(result_like(proposal))
    def run(value):
        before = fingerprint()
        response = client.post("/api/v1/action-results", json=value, headers=headers)
        assert response.status_code < 500, response.get_data(as_text=True)
        if response.status_code >= 400:
            assert response.get_json()["error"]["code"]
            assert fingerprint() == before

    run()


def test_report_intake_never_500(app, client, world):
    headers = {"Authorization": f"Bearer {world.console_token}"}
    target = st.fixed_dictionaries({}, optional={"reference": st.text(max_size=60) | json_values, "kind": json_values})
    intake = (
        st.fixed_dictionaries(
            {},
            optional={
                "external_id": st.text(max_size=210) | json_values,
                "targets": st.lists(target, max_size=3) | json_values,
                "queue": st.sampled_from(["general", "nope"]) | json_values,
                "category": json_values,
                "summary": json_values,
                "policy_version_id": json_values,
                "other": json_values,
            },
        )
        | json_values
    )

    @FUZZ
    @given(intake)
    def run(value):
        before = fingerprint()
        response = client.post("/api/v1/reports", json=value, headers=headers)
        assert response.status_code < 500, response.get_data(as_text=True)
        if response.status_code >= 400:
            assert fingerprint() == before

    run()
