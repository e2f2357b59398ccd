"""References with a line break, and patterns read as JSON Schema reads them (FOUR-10, API-1).

The OpenAPI document publishes `pattern`s anchored with ``^...$``. In JSON Schema
(ECMA-262) ``$`` matches only at the end of the string; Python's ``re.search``, which
jsonschema uses, also lets ``$`` match before a final newline. So ``"post:77\\n"``
passes the published ``^[A-Za-z0-9_.-]{1,50}:[^\\s]{1,440}$`` here, while every
client that validates against the document (or reads the schema) refuses it.
"""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import Report, ReportTarget

from .test_evidence import counts, post


def intake(external_id="ev-1", reference="post:77"):
    return {"external_id": external_id, "targets": [{"reference": reference, "kind": "post"}]}


def test_four10_a_target_reference_with_a_trailing_newline_is_refused(app, client, world):
    """FOUR-10, API-1: `post:77\\n` shows as `post:77` but is another target with none
    of its history (REV-2); the published pattern refuses it, so must the API. No row."""
    before = counts()
    response = post(client, world, intake(reference="post:77\n"))
    stored = db.session.scalars(select(ReportTarget.target_reference).where(ReportTarget.target_reference.like("post:77%"))).all() if response.status_code < 300 else []
    assert response.status_code == 400, (response.status_code, stored)
    assert (response.get_json()["error"]["code"], response.get_json()["error"]["field"]) == (
        "reference_characters",
        "targets[0].reference",
    )
    assert counts() == before


def test_four10_a_report_external_id_with_a_trailing_newline_is_refused(app, client, world):
    """FOUR-10, API-1: the platform's report id is a reference too: `ev-1\\n` is not `ev-1`
    (a second report for the same platform report, idempotency by external_id lost)."""
    first = post(client, world, intake(external_id="ev-1"))
    assert first.status_code == 201
    again = post(client, world, intake(external_id="ev-1\n"))
    reports = db.session.scalars(select(Report.external_id).where(Report.external_id.like("ev-1%"))).all()
    assert again.status_code == 400, (again.status_code, reports)
