"""Workflow graphs and node outcomes (WAIT-1, PREP-4: the graph a version holds)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain import workflow as wf

NODE = {"type": "action", "config": {}, "input_mapping": {"idempotency_key": "decision.id"}, "next": {}}


def graph(**changes):
    value = {"trigger": {"decision_codes": ["remove_content"]}, "start": "a", "nodes": {"a": dict(NODE)}}
    value.update(changes)
    return value


def test_a_valid_graph_has_no_errors():
    assert wf.graph_errors(graph()) == []
    two = graph(nodes={"a": {**NODE, "next": {"applied": "b", "error": "b"}}, "b": NODE})
    assert wf.graph_errors(two) == []


@pytest.mark.parametrize(
    "value, errors",
    [
        ([], ["The graph must be a JSON object."]),
        ({"nodes": {}}, ["The graph needs a non-empty 'nodes' object."]),
        ({"nodes": []}, ["The graph needs a non-empty 'nodes' object."]),
    ],
)
def test_graph_shape(value, errors):
    assert wf.graph_errors(value) == errors


@pytest.mark.parametrize(
    "changes, error",
    [
        ({"start": "missing"}, "'start' must name a node."),
        ({"start": 5}, "'start' must name a node."),
        (
            {"trigger": {"decision_codes": "remove_content"}},
            "'trigger.decision_codes' must be a list of decision codes.",
        ),
        ({"trigger": {"decision_codes": [1]}}, "'trigger.decision_codes' must be a list of decision codes."),
        ({"trigger": "remove_content"}, "'trigger.decision_codes' must be a list of decision codes."),
        ({"trigger": {}}, "'trigger.decision_codes' must be a list of decision codes."),
        ({"nodes": {"a": {**NODE, "type": "email"}}}, "Node 'a' must be an object with type 'action'."),
        ({"nodes": {"a": "action"}}, "Node 'a' must be an object with type 'action'."),
        ({"nodes": {"a": {**NODE, "config": []}}}, "Node 'a': 'config' must be an object."),
        ({"nodes": {"a": {**NODE, "input_mapping": []}}}, "Node 'a': 'input_mapping' must be an object."),
        ({"nodes": {"a": {**NODE, "next": ["a"]}}}, "Node 'a': 'next' must map ports to node ids."),
        ({"nodes": {"a": {**NODE, "next": {"done": "a"}}}}, "Node 'a': next['done'] must map a port to a node."),
        ({"nodes": {"a": {**NODE, "next": {"applied": "z"}}}}, "Node 'a': next['applied'] must map a port to a node."),
        ({"nodes": {"a": {**NODE, "next": {"applied": 3}}}}, "Node 'a': next['applied'] must map a port to a node."),
        (
            {"nodes": {"a": {**NODE, "input_mapping": {"payload": 7}}}},
            "Node 'a': input_mapping['payload'] must be a JMESPath expression string.",
        ),
    ],
)
def test_each_graph_error(changes, error):
    """Every problem is named, so an admin can fix the version before saving it."""
    assert wf.graph_errors(graph(**changes)) == [error]


def test_every_bad_node_is_named():
    """A bad node does not hide the next one's problems."""
    nodes = {"a": "x", "b": {**NODE, "next": ["a"]}, "c": {**NODE, "config": []}}
    assert wf.graph_errors(graph(nodes=nodes)) == [
        "Node 'a' must be an object with type 'action'.",
        "Node 'b': 'next' must map ports to node ids.",
        "Node 'c': 'config' must be an object.",
    ]


def test_an_expression_that_does_not_compile_is_named():
    errors = wf.graph_errors(graph(nodes={"a": {**NODE, "input_mapping": {"payload": "{a: "}}}))
    assert len(errors) == 1
    assert errors[0].startswith("Node 'a': input_mapping['payload'] is not a JMESPath expression (")


def test_missing_optional_parts_are_fine():
    """config, input_mapping and next may be left out."""
    assert wf.graph_errors(graph(nodes={"a": {"type": "action"}})) == []
    assert wf.graph_errors(graph(nodes={"a": {"type": "action", "next": None}})) == []


def test_next_node():
    """WAIT-1: the node a port leads to; None ends the run."""
    g = graph(nodes={"a": {**NODE, "next": {"applied": "b", "error": 4}}, "b": NODE})
    assert wf.next_node(g, "a", "applied") == "b"
    assert wf.next_node(g, "a", "rejected") is None
    assert wf.next_node(g, "a", "error") is None
    assert wf.next_node(g, "b", "applied") is None
    assert wf.next_node(g, "missing", "applied") is None
    assert wf.next_node({}, "a", "applied") is None
    assert wf.next_node(graph(nodes={"a": {**NODE, "next": ["b"]}}), "a", "applied") is None
    assert wf.next_node(graph(nodes={"a": {**NODE, "next": None}}), "a", "applied") is None


def test_triggered_by():
    assert wf.triggered_by(graph(), "remove_content")
    assert not wf.triggered_by(graph(), "no_violation")
    assert not wf.triggered_by({}, "remove_content")
    assert not wf.triggered_by({"trigger": None}, "remove_content")
    assert not wf.triggered_by({"trigger": {"decision_codes": None}}, "remove_content")


def test_node_outcomes():
    """WAIT-1: a node finishes on a port or waits for an event until a deadline."""
    deadline = datetime(2026, 5, 1, tzinfo=UTC)
    done = wf.finished("applied", proposal_id="p")
    assert (done.port, done.waiting, done.proposal_id) == ("applied", False, "p")
    assert done.as_dict() == {"port": "applied", "proposal_id": "p"}
    wait = wf.waiting("action.p.resolved", deadline, task_id="t", recovery_required=True)
    assert (wait.waiting, wait.event_type, wait.deadline) == (True, "action.p.resolved", deadline)
    assert wait.as_dict() == {
        "event_type": "action.p.resolved",
        "deadline": "2026-05-01T00:00:00+00:00",
        "task_id": "t",
        "recovery_required": True,
    }
    assert wf.finished("error", error_code="x", extra={"a": 1}).as_dict() == {
        "port": "error",
        "error_code": "x",
        "extra": {"a": 1},
    }
    assert wf.NodeOutcome().waiting and wf.NodeOutcome().as_dict() == {}


def correcting(payload) -> dict:
    return graph(nodes={"a": {**NODE, "config": {"correction": {"payload": payload}}}})


@pytest.mark.parametrize(
    "payload, error",
    [
        ("!" * 31 + "original.payload", "is nested too deeply (at most 30 levels)"),
        ("original.[", "is not a JMESPath expression ("),
        (7, "must be a JMESPath expression string"),
    ],
)
def test_sec5_a_correction_payload_mapping_is_checked_like_an_input_mapping(payload, error):
    """SEC-5: the correction's payload expression runs later too, so it is refused at save."""
    [problem] = wf.graph_errors(correcting(payload))
    assert problem.startswith(f"Node 'a': config.correction.payload {error}") and problem.endswith(".")


@pytest.mark.parametrize(
    "config",
    [
        {"correction": {"payload": "original.payload"}},
        {"correction": {"payload": ""}},  # empty: the default, original.payload
        {"correction": {}},
        {"correction": "not an object"},
        {},
    ],
)
def test_a_correction_payload_that_can_run_or_is_left_to_the_default_passes(config):
    assert wf.graph_errors(graph(nodes={"a": {**NODE, "config": config}})) == []


def test_a_correction_error_names_its_node():
    nodes = {"a": {**NODE, "next": {"applied": "b"}}, "b": {**NODE, "config": {"correction": {"payload": "x.["}}}}
    [problem] = wf.graph_errors(graph(nodes=nodes))
    assert problem.startswith("Node 'b': config.correction.payload is not a JMESPath expression (")
