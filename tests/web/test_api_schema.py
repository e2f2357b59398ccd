"""The OpenAPI document checked against the running API by schemathesis: every
operation, positive and negative data, on both backends, bounded in time.

It joins the hand-written fuzzing in `test_api_fuzz.py` (which aims at real action
ids): whatever arrives, the answer is never a 5xx, its status, content type and body
match the document, and a refused request changes no row.
"""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import func, select

from app.demo_platform import serve
from app.extensions import db
from app.models import ActionProposal, Appeal, AuditEvent, Report, ReportEvidence, ReportTarget
from app.web.api.openapi import openapi_document

from ..builders import decide_report

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES_PER_OPERATION = 40
SECONDS_PER_OPERATION = 10  # four operations: under a minute per backend


def fingerprint():
    db.session.rollback()
    rows = sorted(db.session.execute(select(ActionProposal.id, ActionProposal.state, ActionProposal.updated_at)).all())
    return (
        rows,
        *(
            db.session.scalar(select(func.count()).select_from(m))
            for m in (AuditEvent, Report, ReportTarget, ReportEvidence, Appeal)
        ),
    )


@pytest.fixture
def api(app, world, platform):
    """The API served on loopback, and an integration's token (base URL, headers)."""
    decide_report(world)  # an action exists, so lookups are not all empty
    server, url = serve(app)
    yield f"{url}/api/v1", {"Authorization": f"Bearer {world.console_token}"}
    server.shutdown()


schema = schemathesis.openapi.from_dict(openapi_document())
_started: dict[str, float] = {}


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_every_operation_matches_its_document(case, api):
    """REV-1 (the evidence fields are documented): no 5xx, every response matches the
    document, a refused request changes no row."""
    first = _started.setdefault(f"{id(api)}:{case.operation.label}", time.monotonic())
    if time.monotonic() - first > SECONDS_PER_OPERATION:
        return  # the time bound: later examples of this operation are not sent
    base_url, headers = api
    before = fingerprint()
    response = case.call(base_url=base_url, headers=headers, timeout=10)
    case.validate_response(response, checks=CHECKS, headers=headers)
    if response.status_code >= 400:
        assert fingerprint() == before, f"{case.operation.label} refused with {response.status_code} but changed rows"
