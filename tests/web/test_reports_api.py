"""Report intake from a platform: idempotent by the platform's report id."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import AuditEvent, Report, ReportTarget


def post(client, world, value):
    return client.post("/api/v1/reports", json=value, headers={"Authorization": f"Bearer {world.console_token}"})


def counts():
    db.session.rollback()
    return tuple(db.session.scalar(select(func.count()).select_from(m)) for m in (Report, ReportTarget, AuditEvent))


def test_intake_creates_once(app, client, world):
    value = {
        "external_id": "plat-9",
        "queue": "general",
        "category": "spam",
        "summary": "Spam link",
        "targets": [{"reference": "post:42", "kind": "post"}, {"reference": "user:7", "kind": "account"}],
    }
    first = post(client, world, value)
    assert first.status_code == 201 and first.get_json()["created"] is True
    report = db.session.get(Report, first.get_json()["report_id"])
    assert (report.state, report.integration_id, report.category) == ("open", world.integration_id, "spam")
    targets = db.session.scalars(
        select(ReportTarget.target_reference).where(ReportTarget.report_id == report.id).order_by(ReportTarget.position)
    ).all()
    assert targets == ["post:42", "user:7"]
    before = counts()
    again = post(client, world, value)
    assert again.status_code == 200 and again.get_json() == {**first.get_json(), "created": False}
    assert counts() == before


@pytest.mark.parametrize(
    "value, field",
    [
        ({"targets": [{"reference": "post:1"}]}, "external_id"),
        ({"external_id": "x" * 201, "targets": [{"reference": "post:1"}]}, "external_id"),
        ({"external_id": "e", "targets": []}, "targets"),
        ({"external_id": "e", "targets": [{"reference": "no colon"}]}, "targets"),
        ({"external_id": "e", "targets": [{"reference": "post:1", "extra": 1}]}, "targets"),
        ({"external_id": "e", "targets": [{"reference": "post:1"}] * 51}, "targets"),
        ({"external_id": "e", "targets": [{"reference": "post:1"}], "summary": "x" * 5001}, "summary"),
        ({"external_id": "e", "targets": [{"reference": "post:1"}], "category": 5}, "category"),
        ({"external_id": "e", "targets": [{"reference": "post:1"}], "surprise": True}, "surprise"),
    ],
)
def test_bad_intake_is_400_and_changes_nothing(app, client, world, value, field):
    before = counts()
    response = post(client, world, value)
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert (error["code"], error["field"]) == ("report_invalid", field)
    assert counts() == before


def test_unknown_queue_is_404(app, client, world):
    response = post(client, world, {"external_id": "e", "queue": "nope", "targets": [{"reference": "post:1"}]})
    assert response.status_code == 404 and response.get_json()["error"]["code"] == "queue_not_found"


def test_intake_needs_a_token(app, client, world):
    before = counts()
    response = client.post("/api/v1/reports", json={"external_id": "e", "targets": [{"reference": "post:1"}]})
    assert response.status_code == 401 and counts() == before
