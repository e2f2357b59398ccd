"""Input mappings and schemas (app/domain/expressions.py): a node's JMESPath mapping
over the run context (PREP-4), and JSON Schema checks of payloads (PREP-4, COMP-1)."""

from __future__ import annotations

import copy

import pytest
from jmespath.exceptions import JMESPathError

from app.domain.errors import ActionError
from app.domain.expressions import check_schema, evaluate_mapping, schema_errors

CONTEXT = {
    "report": {"id": "rep_1", "public_reference": "R-0001", "state": "decided", "queue_id": "que_1"},
    "targets": [
        {"target_reference": "post:1001", "kind": "post"},
        {"target_reference": "account:7", "kind": "account"},
    ],
    "decision": {"id": "dec_1", "decision_code": "remove_content"},
    "appeal": None,
    "run": {"id": "run_1"},
}


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("report.public_reference", "R-0001"),
        ("join(':', ['takedown', decision.id])", "takedown:dec_1"),
        ("{reference: targets[0].target_reference, kind: targets[0].kind}", {"reference": "post:1001", "kind": "post"}),
        ("targets[].target_reference", ["post:1001", "account:7"]),
        ("targets[?kind == 'account'] | [0].target_reference", "account:7"),
        ("'decided'", "decided"),
        ("`{}`", {}),
        ("`3`", 3),
        ("appeal", None),
        ("appeal.outcome", None),  # a path through null is null, not an error
        ("report.missing", None),
        ("length(targets)", 2),
    ],
)
def test_each_expression_is_evaluated_over_the_context(expression, expected):
    """PREP-4: target, payload, preconditions and the key come from JMESPath."""
    assert evaluate_mapping({"value": expression}, CONTEXT) == {"value": expected}


def test_every_key_of_the_mapping_is_kept():
    mapping = {
        "idempotency_key": "join(':', ['takedown', decision.id])",
        "target": "{reference: targets[0].target_reference}",
        "payload": "{reason_code: decision.decision_code, report_reference: report.public_reference}",
        "preconditions": "{report_state: 'decided'}",
    }
    assert evaluate_mapping(mapping, CONTEXT) == {
        "idempotency_key": "takedown:dec_1",
        "target": {"reference": "post:1001"},
        "payload": {"reason_code": "remove_content", "report_reference": "R-0001"},
        "preconditions": {"report_state": "decided"},
    }
    assert evaluate_mapping({}, CONTEXT) == {}


def test_evaluation_does_not_change_the_context():
    before = copy.deepcopy(CONTEXT)
    evaluate_mapping({"t": "sort_by(targets, &kind)", "r": 'merge(report, `{"state": "x"}`)'}, CONTEXT)
    assert before == CONTEXT


@pytest.mark.parametrize("mapping", [None, [], "report.id", ["report.id"], 7])
def test_the_mapping_must_be_an_object(mapping):
    """PREP-2/PREP-4: a broken node configuration is action_configuration_invalid."""
    with pytest.raises(ActionError) as caught:
        evaluate_mapping(mapping, CONTEXT)
    assert caught.value.code == "action_configuration_invalid"
    assert caught.value.retryable is False


@pytest.mark.parametrize("expression", [None, 7, ["report.id"], {"a": "report.id"}])
def test_each_expression_must_be_text(expression):
    with pytest.raises(ActionError) as caught:
        evaluate_mapping({"ok": "report.id", "bad": expression}, CONTEXT)
    assert caught.value.code == "action_configuration_invalid"


@pytest.mark.parametrize(
    "expression",
    [
        "targets[0",  # does not compile
        "join(",
        "join(',', report)",  # compiles, fails on the value's type
        "length(`1`)",
        "unknown_function(report)",
        "to_number(report) + 1",
    ],
)
def test_expressions_that_do_not_compile_or_evaluate(expression):
    """PREP-4: an expression that does not compile or evaluate is the configuration's
    error (an evaluation error is kept as the cause)."""
    with pytest.raises(ActionError) as caught:
        evaluate_mapping({"value": expression}, CONTEXT)
    assert caught.value.code == "action_configuration_invalid"
    cause = caught.value.__cause__
    assert cause is None or isinstance(cause, JMESPathError)


# -- JSON Schema checks --------------------------------------------------------------------

INPUT_SCHEMA = {
    "type": "object",
    "required": ["reason_code", "report_reference"],
    "properties": {
        "reason_code": {"type": "string", "maxLength": 5},
        "report_reference": {"type": "string"},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "value, errors",
    [
        ({"reason_code": "spam", "report_reference": "R-1"}, []),
        ({"reason_code": "spam"}, ["'report_reference' is a required property"]),
        ({}, ["'reason_code' is a required property", "'report_reference' is a required property"]),
        ({"reason_code": "harassment", "report_reference": "R-1"}, ["'harassment' is too long"]),
        ({"reason_code": 1, "report_reference": "R-1"}, ["1 is not of type 'string'"]),
        (
            {"reason_code": "spam", "report_reference": "R-1", "extra": True},
            ["Additional properties are not allowed ('extra' was unexpected)"],
        ),
        ([], ["[] is not of type 'object'"]),
        (None, ["None is not of type 'object'"]),
    ],
)
def test_schema_errors_lists_every_problem(value, errors):
    """PREP-4: the payload must validate against the component's input schema."""
    assert schema_errors(value, INPUT_SCHEMA) == errors


def test_the_schema_dialect_is_the_one_it_names():
    """`$schema` picks the draft: prefixItems only means something from 2020-12 on."""
    items = {"prefixItems": [{"type": "string"}]}
    assert schema_errors([1], {"$schema": "https://json-schema.org/draft/2020-12/schema", **items}) == [
        "1 is not of type 'string'"
    ]
    assert schema_errors([1], {"$schema": "http://json-schema.org/draft-07/schema#", **items}) == []


@pytest.mark.parametrize(
    "schema, kind",
    [
        ({"$ref": "#/definitions/missing"}, "the schema cannot be evaluated ("),
        ({"$ref": "#"}, "the schema cannot be evaluated (RecursionError)"),
        ({"$ref": "https://example.com/remote.json"}, "the schema cannot be evaluated ("),
    ],
    ids=["dangling", "cyclic", "remote"],
)
def test_a_schema_that_cannot_be_evaluated_is_an_error_not_a_pass(schema, kind):
    """A value is never shown valid by a schema that cannot run (and nothing raises)."""
    [error] = schema_errors({"any": "value"}, schema)
    assert error.startswith(kind) and error.endswith(")")


@pytest.mark.parametrize(
    "schema",
    [
        INPUT_SCHEMA,
        {},
        {"type": "string", "pattern": "^[a-z]+$"},
        {"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"},
    ],
)
def test_usable_schemas_pass_check_schema(schema):
    assert check_schema(schema) == []


@pytest.mark.parametrize("schema", [None, [], "object", 1, True])
def test_check_schema_needs_an_object(schema):
    assert check_schema(schema) == ["A JSON Schema must be an object."]


def test_check_schema_applies_the_meta_schema():
    assert check_schema({"type": "nope"}) == ["'nope' is not valid under any of the given schemas"]
    assert check_schema({"required": "a"}) == ["'a' is not of type 'array'"]


@pytest.mark.parametrize(
    "schema", [{"$ref": "#/definitions/missing"}, {"properties": {"a": {"$ref": "#"}}, "$ref": "#"}]
)
def test_check_schema_refuses_references_that_cannot_be_followed(schema):
    [problem] = check_schema(schema)
    assert problem.startswith("The schema cannot be used to validate values: the schema cannot be evaluated (")
