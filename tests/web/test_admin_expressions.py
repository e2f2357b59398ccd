"""Administrator input that runs later — JSON Schema patterns, JMESPath expressions,
implementation references — is checked where it is saved (SEC-3, SEC-5): a 400 that
says why, nothing stored; and what was stored before fails cleanly at run time."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import AppealCorrection, ComponentVersion

from ..builders import approve, decide_report, login, reload, set_graph
from .test_admin import admin, assert_refused, post, snapshot
from .test_admin_components import create as create_component
from .test_admin_workflows import create as create_workflow
from .test_admin_workflows import graph_of

DEEP = "(" * 600 + "report.id" + ")" * 600


def schema_with_pattern(pattern: str) -> str:
    return json.dumps({"type": "object", "properties": {"reason_code": {"type": "string", "pattern": pattern}}})


@pytest.mark.parametrize(
    "pattern, says",
    [("^(a)\\1$", "backreferences"), ("^(?!admin)", "lookaround"), ("(?<=x)y", "lookaround")],
)
def test_a_pattern_re2_cannot_run_is_refused_at_save(app, client, world, pattern, says):
    """SEC-5: 400, a message that names RE2 and what it does not support, no row."""
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(
        create_component(client, csrf, world, input_schema=schema_with_pattern(pattern)),
        400,
        "component_input_schema_invalid",
    )
    assert says in page and "RE2" in page
    assert snapshot() == before


@pytest.mark.parametrize("pattern", ["^(a|aa)+$", "^\\p{L}+$"])
def test_patterns_re2_runs_are_saved(app, client, world, pattern):
    """SEC-5: patterns that backtracked on Python's engine are harmless on RE2, and
    RE2's own syntax (\\p{L}) is accepted."""
    csrf = admin(client)
    response = create_component(client, csrf, world, input_schema=schema_with_pattern(pattern))
    assert response.status_code == 303, response.get_data(as_text=True)[:1000]


@pytest.mark.parametrize(
    "reference",
    ["POST /http://127.0.0.1:6379/x", "POST //127.0.0.1:6379/x", "POST /a//b", "POST http://127.0.0.1:6379/x"],
)
def test_a_reference_that_names_another_origin_is_refused_at_save(app, client, world, reference):
    """SEC-3: a reference is a path under the connection's base URL."""
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(
        create_component(client, csrf, world, implementation_reference=reference), 400, "component_operation_invalid"
    )
    assert "base URL" in page
    assert snapshot() == before


def deep_mapping(graph):
    graph["nodes"]["takedown"]["input_mapping"]["payload"] = DEEP


def deep_correction(graph):
    graph["nodes"]["takedown"]["config"]["correction"]["payload"] = DEEP


@pytest.mark.parametrize("mutate", [deep_mapping, deep_correction], ids=["input_mapping", "correction"])
def test_a_too_deep_expression_is_refused_at_save_on_every_screen(app, client, world, mutate):
    """SEC-5: node input mappings and correction mappings alike: 400, never stored."""
    graph = graph_of(world)
    mutate(graph)
    csrf = admin(client)
    before = snapshot()
    page = assert_refused(create_workflow(client, csrf, world, graph=json.dumps(graph)), 400, "workflow_graph_invalid")
    assert "too deeply" in page
    assert snapshot() == before


def test_a_correction_expression_must_be_a_string(app, client, world):
    """SEC-5: the correction's payload mapping is checked like an input mapping."""
    graph = graph_of(world)
    graph["nodes"]["takedown"]["config"]["correction"]["payload"] = 5
    csrf = admin(client)
    page = assert_refused(create_workflow(client, csrf, world, graph=json.dumps(graph)), 400, "workflow_graph_invalid")
    assert "correction.payload" in page


def test_a_stored_too_deep_correction_mapping_fails_the_correction_not_the_page(app, client, world, platform):
    """SEC-5: one stored before the check: the reversed outcome is recorded, and the
    correction fails with action_configuration_invalid instead of a 500."""
    from app.services.cases.appeals import file_appeal
    from app.services.lifecycle.dispatch import deliver
    from app.services.uow import Actor

    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    set_graph(world, deep_correction)
    appeal_id = file_appeal(
        world.report_ids[0], statement="Satire.", actor=Actor.system(), installation_id=world.installation_id
    ).appeal_id
    token = login(client, "reviewer2@example.com")
    response = post(client, f"/appeals/{appeal_id}/decision", token, outcome="reversed", rationale="Allowed")
    assert response.status_code == 303, response.get_data(as_text=True)[:1000]
    db.session.rollback()
    correction = db.session.scalar(select(AppealCorrection))
    assert (correction.state, correction.last_error_code) == ("failed", "action_configuration_invalid")
    assert reload(proposal).state == "applied"


def test_a_stored_reference_to_another_origin_is_refused_at_delivery(app, world, scripted):
    """SEC-3: one stored before the check never leaves for the other origin."""
    from pytest_httpserver import HTTPServer

    from .. import scripted as s
    from ..builders import set_row

    inside = HTTPServer(host="127.0.0.1", port=0)
    inside.expect_request("/x").respond_with_json({"status": "applied"})
    inside.start()
    try:
        script = scripted(s.applied())
        proposal = decide_report(world)
        approve(world, proposal)
        set_row(
            ComponentVersion,
            world.components["takedown"],
            implementation_reference=f"POST /http://127.0.0.1:{inside.port}/x",
        )
        from app.services.lifecycle.dispatch import deliver

        assert deliver(proposal.id).error_code == "action_component_operation_invalid"
        assert script.requests == [] and inside.log == []
    finally:
        inside.clear()
        inside.stop()
