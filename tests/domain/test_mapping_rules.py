"""Input mappings and administrator schemas (PREP-4, SEC-5)."""

from __future__ import annotations

import pytest

from app.domain.errors import ActionError
from app.domain.expressions import check_schema, evaluate_mapping, schema_errors

CONTEXT = {"report": {"id": "rep_1"}, "decision": {"decision_code": "remove_content"}, "targets": [{"t": "post:1"}]}


def test_each_expression_is_evaluated_over_the_context():
    """PREP-4: JMESPath over the run context."""
    mapping = {"key": "join(':', ['x', report.id])", "code": "decision.decision_code", "none": "appeal.id"}
    assert evaluate_mapping(mapping, CONTEXT) == {"key": "x:rep_1", "code": "remove_content", "none": None}
    assert evaluate_mapping({}, CONTEXT) == {}


@pytest.mark.parametrize(
    "mapping",
    [["report.id"], "report.id", None, {"key": 5}, {"key": "{a: "}, {"key": "abs(report.id)"}],
)
def test_a_bad_mapping_is_a_configuration_error(mapping):
    """PREP-4: not an object of strings, not compiling or not evaluating."""
    with pytest.raises(ActionError) as caught:
        evaluate_mapping(mapping, CONTEXT)
    assert caught.value.code == "action_configuration_invalid"


SCHEMA = {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}


def test_schema_errors_lists_every_problem():
    assert schema_errors({"a": "x"}, SCHEMA) == []
    assert schema_errors({}, SCHEMA) == ["'a' is a required property"]
    assert schema_errors({"a": 1}, SCHEMA) == ["1 is not of type 'string'"]
    assert len(schema_errors([], {"type": "object", "minProperties": 1})) == 1


def test_an_unusable_schema_is_an_error_not_an_exception():
    """A schema whose reference cannot be resolved never validates a value."""
    broken = {"$ref": "#/definitions/missing"}
    [message] = schema_errors({}, broken)
    assert message.startswith("the schema cannot be evaluated (")


def test_check_schema():
    """SEC-5: a schema that cannot be used is refused at save, with a reason."""
    assert check_schema(SCHEMA) == []
    assert check_schema({"type": "object", "patternProperties": {"^x-": {"type": "string"}}}) == []
    assert check_schema([]) == ["A JSON Schema must be an object."]
    assert check_schema({"type": "nonsense"}) != []
    [problem] = check_schema({"$ref": "#/definitions/missing"})
    assert problem.startswith("The schema cannot be used to validate values: the schema cannot be evaluated (")


def test_only_patterns_are_checked():
    """SEC-5: a property named like the shape is not a pattern."""
    assert check_schema({"properties": {"(a+)+": {"type": "string"}}, "description": "(a+)+"}) == []
    assert check_schema({"type": "string", "pattern": "^[a-z]+$"}) == []


def test_a_schema_unusable_for_some_values_only_is_refused():
    """SEC-5: every kind of sample value is tried."""
    only_objects = {"if": {"type": "object"}, "then": {"$ref": "#/definitions/missing"}}
    [problem] = check_schema(only_objects)
    assert problem.startswith("The schema cannot be used to validate values")
