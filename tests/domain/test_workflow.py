"""Workflow graphs (app/domain/workflow.py): what an admin may save, which node a
port leads to, which decisions start a workflow, and node outcomes (WAIT-1)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from app.domain.workflow import (
    PORTS,
    NodeOutcome,
    finished,
    graph_errors,
    next_node,
    triggered_by,
    waiting,
)

START = "'start' must name a node."
NODES = "The graph needs a non-empty 'nodes' object."
TRIGGER = "'trigger.decision_codes' must be a list of decision codes."


def node(**overrides) -> dict:
    base = {
        "type": "action",
        "config": {"component_version_id": "cv_1", "action_code": "takedown"},
        "input_mapping": {"idempotency_key": "join(':', ['takedown', decision.id])", "target": "targets[0]"},
        "next": {},
    }
    base.update(overrides)
    return base


def graph(**overrides) -> dict:
    base = {"trigger": {"decision_codes": ["remove_content"]}, "start": "a", "nodes": {"a": node()}}
    base.update(overrides)
    return base


def with_node(**overrides) -> dict:
    return graph(nodes={"a": node(**overrides)})


def test_a_well_formed_graph_has_no_errors():
    assert graph_errors(graph()) == []


def test_every_port_may_lead_to_a_node():
    """WAIT-1: applied, rejected, timeout and error are the ports."""
    assert PORTS == ("applied", "rejected", "timeout", "error")
    nodes = {"a": node(next={port: "b" for port in PORTS}), "b": node()}
    assert graph_errors(graph(nodes=nodes)) == []


@pytest.mark.parametrize(
    "value",
    [
        node(next=None),
        node(next={}),
        {k: v for k, v in node().items() if k not in ("config", "input_mapping", "next")},
        node(input_mapping={}),
    ],
    ids=["next-null", "next-empty", "only-type", "no-mapping"],
)
def test_optional_parts_of_a_node(value):
    assert graph_errors(graph(nodes={"a": value})) == []


@pytest.mark.parametrize("value", [None, [], "graph", 3, True])
def test_the_graph_must_be_an_object(value):
    assert graph_errors(value) == ["The graph must be a JSON object."]


@pytest.mark.parametrize(
    "nodes",
    ["missing", None, {}, [], ["a"], "a"],
    ids=["missing", "null", "empty", "empty-list", "list", "text"],
)
def test_the_graph_needs_nodes(nodes):
    value = graph() if nodes == "missing" else graph(nodes=nodes)
    if nodes == "missing":
        del value["nodes"]
    assert graph_errors(value) == [NODES]


@pytest.mark.parametrize("start", ["missing", None, "b", 1, ["a"], ""], ids=str)
def test_start_must_name_a_node(start):
    value = graph(start=start)
    if start == "missing":
        del value["start"]
    assert graph_errors(value) == [START]


@pytest.mark.parametrize(
    "trigger",
    ["missing", None, [], "remove_content", {}, {"decision_codes": "remove_content"}, {"decision_codes": ["a", 1]}],
    ids=["missing", "null", "list", "text", "empty", "codes-text", "codes-not-text"],
)
def test_the_trigger_lists_decision_codes(trigger):
    value = graph(trigger=trigger)
    if trigger == "missing":
        del value["trigger"]
    assert graph_errors(value) == [TRIGGER]


def test_an_empty_trigger_list_is_allowed():
    """A workflow no decision starts (yet) is still a valid graph."""
    assert graph_errors(graph(trigger={"decision_codes": []})) == []


@pytest.mark.parametrize(
    "value, error",
    [
        ("action", "Node 'a' must be an object with type 'action'."),
        (None, "Node 'a' must be an object with type 'action'."),
        ({"type": "wait"}, "Node 'a' must be an object with type 'action'."),
        ({"config": {}}, "Node 'a' must be an object with type 'action'."),
        (node(config=[]), "Node 'a': 'config' must be an object."),
        (node(config="x"), "Node 'a': 'config' must be an object."),
        (node(input_mapping=["target"]), "Node 'a': 'input_mapping' must be an object."),
        (node(input_mapping="target"), "Node 'a': 'input_mapping' must be an object."),
        (node(next=["b"]), "Node 'a': 'next' must map ports to node ids."),
        (node(next="b"), "Node 'a': 'next' must map ports to node ids."),
        (node(next={"applied": "missing"}), "Node 'a': next['applied'] must map a port to a node."),
        (node(next={"done": "a"}), "Node 'a': next['done'] must map a port to a node."),
        (node(next={"applied": 1}), "Node 'a': next['applied'] must map a port to a node."),
        (node(next={"applied": None}), "Node 'a': next['applied'] must map a port to a node."),
    ],
)
def test_node_errors(value, error):
    assert graph_errors(graph(nodes={"a": value})) == [error]


@pytest.mark.parametrize(
    "expression, error",
    [
        (7, "Node 'a': input_mapping['target'] must be a JMESPath expression string."),
        (None, "Node 'a': input_mapping['target'] must be a JMESPath expression string."),
        (["targets[0]"], "Node 'a': input_mapping['target'] must be a JMESPath expression string."),
        ({"reference": "x"}, "Node 'a': input_mapping['target'] must be a JMESPath expression string."),
    ],
)
def test_mapping_values_must_be_expression_text(expression, error):
    """PREP-4: each mapped field is one JMESPath expression."""
    assert graph_errors(with_node(input_mapping={"target": expression})) == [error]


@pytest.mark.parametrize("expression", ["targets[0", "join(", "report.", "[?state == ]", "a || "])
def test_mapping_expressions_must_compile(expression):
    """PREP-4: an expression that does not compile is refused when the version is saved."""
    [error] = graph_errors(with_node(input_mapping={"target": expression}))
    assert error.startswith("Node 'a': input_mapping['target'] is not a JMESPath expression (")
    assert error.endswith(").")


@pytest.mark.parametrize(
    "expression",
    ["targets[0]", "{reference: targets[0].target_reference}", "join(':', ['x', decision.id])", "`{}`", "'text'"],
)
def test_mapping_expressions_that_compile_pass(expression):
    assert graph_errors(with_node(input_mapping={"target": expression})) == []


def test_every_error_is_reported_at_once_in_a_stable_order():
    """An admin sees every problem in one answer: start, mappings, trigger, then nodes."""
    value = {
        "trigger": {"decision_codes": "remove_content"},
        "start": "z",
        "nodes": {
            "a": node(input_mapping={"target": 1, "payload": "report."}, next={"applied": "zz", "done": "a"}),
            "b": "not a node",
            "c": node(config=[], input_mapping=[]),
        },
    }
    errors = graph_errors(value)
    assert errors[0] == START
    assert errors[1] == "Node 'a': input_mapping['target'] must be a JMESPath expression string."
    assert errors[2].startswith("Node 'a': input_mapping['payload'] is not a JMESPath expression")
    assert errors[3:] == [
        TRIGGER,
        "Node 'a': next['applied'] must map a port to a node.",
        "Node 'a': next['done'] must map a port to a node.",
        "Node 'b' must be an object with type 'action'.",
        "Node 'c': 'config' must be an object.",
        "Node 'c': 'input_mapping' must be an object.",
    ]


def test_a_node_with_a_bad_next_still_has_its_mapping_checked():
    value = with_node(next="b", input_mapping={"target": 3})
    assert graph_errors(value) == [
        "Node 'a': input_mapping['target'] must be a JMESPath expression string.",
        "Node 'a': 'next' must map ports to node ids.",
    ]


def test_graph_errors_does_not_change_the_graph():
    value = graph(nodes={"a": node(next={"applied": "b"}), "b": node()})
    before = copy.deepcopy(value)
    graph_errors(value)
    assert value == before


# -- following the graph (WAIT-1) -----------------------------------------------------

FOLLOW = {"nodes": {"a": {"next": {"applied": "b", "error": 7}}, "b": {"next": None}, "c": {"next": ["a"]}, "d": None}}


@pytest.mark.parametrize(
    "graph_, node_id, port, expected",
    [
        (FOLLOW, "a", "applied", "b"),
        (FOLLOW, "a", "rejected", None),  # no next node: the run ends on this port
        (FOLLOW, "a", "error", None),  # not a node id
        (FOLLOW, "b", "applied", None),
        (FOLLOW, "c", "applied", None),
        (FOLLOW, "d", "applied", None),
        (FOLLOW, "missing", "applied", None),
        ({}, "a", "applied", None),
    ],
)
def test_next_node(graph_, node_id, port, expected):
    """WAIT-1: the port leads to the next node, or the run ends."""
    assert next_node(graph_, node_id, port) == expected


@pytest.mark.parametrize(
    "graph_, code, expected",
    [
        ({"trigger": {"decision_codes": ["remove_content", "suspend"]}}, "suspend", True),
        ({"trigger": {"decision_codes": ["remove_content"]}}, "no_violation", False),
        ({"trigger": {"decision_codes": []}}, "remove_content", False),
        ({"trigger": {"decision_codes": None}}, "remove_content", False),
        ({"trigger": {}}, "remove_content", False),
        ({"trigger": None}, "remove_content", False),
        ({}, "remove_content", False),
    ],
)
def test_triggered_by(graph_, code, expected):
    assert triggered_by(graph_, code) is expected


# -- node outcomes ----------------------------------------------------------------------

DEADLINE = datetime(2026, 12, 1, 8, 30, tzinfo=UTC)


def test_a_finished_node_names_its_port():
    outcome = finished("applied", proposal_id="p1", payload_digest="sha256:ab")
    assert (outcome.port, outcome.waiting) == ("applied", False)
    assert outcome.as_dict() == {"port": "applied", "proposal_id": "p1", "payload_digest": "sha256:ab"}


def test_a_waiting_node_names_its_event_and_deadline():
    outcome = waiting("action.p1.resolved", DEADLINE, proposal_id="p1", task_id="t1")
    assert (outcome.port, outcome.waiting) == (None, True)
    assert outcome.as_dict() == {
        "proposal_id": "p1",
        "event_type": "action.p1.resolved",
        "deadline": "2026-12-01T08:30:00+00:00",
        "task_id": "t1",
    }


def test_outcome_dict_keeps_flags_and_extras_that_are_set():
    outcome = finished(
        "error", error_code="action_approval_expired", recovery_required=True, idempotent_replay=True, extra={"n": 1}
    )
    assert outcome.as_dict() == {
        "port": "error",
        "error_code": "action_approval_expired",
        "recovery_required": True,
        "idempotent_replay": True,
        "extra": {"n": 1},
    }
    assert NodeOutcome().as_dict() == {}
    assert NodeOutcome().waiting
