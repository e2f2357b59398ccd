"""Administrator input that runs at run time: JSON Schema patterns on RE2 and
JMESPath expressions within size and depth limits (SEC-5)."""

from __future__ import annotations

import pytest

from app.domain import expressions
from app.domain.errors import ActionError
from app.domain.expressions import check_schema, evaluate_mapping, expression_problem, schema_errors

CATASTROPHIC = ["^((a+))+$", "^(a|a)*$", "^(a|aa)+$", "^(\\w+\\s?)*$"]
# Long enough that a backtracking engine would not finish within the test run.
HOSTILE_INPUT = "a" * 5000 + "!"


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_patterns_run_in_linear_time(pattern):
    """SEC-5: the patterns that backtracked are usable, and a hostile input is
    rejected at once (RE2 never backtracks)."""
    assert check_schema({"type": "string", "pattern": pattern}) == []
    assert schema_errors(HOSTILE_INPUT, {"type": "string", "pattern": pattern})
    assert schema_errors("a" * 50, {"type": "string", "pattern": pattern}) == []


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_pattern_properties_run_in_linear_time(pattern):
    """SEC-5: patternProperties, and additionalProperties beside them, use RE2 too."""
    schema = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}, "additionalProperties": False}
    assert check_schema(schema) == []
    assert schema_errors({HOSTILE_INPUT: 1}, schema)
    assert schema_errors({"aaaa": 1}, schema) == []
    assert schema_errors({"aaaa": "x"}, schema)


def test_the_engine_is_re2():
    r"""SEC-5: RE2 syntax an ECMA-262 author expects (\p{L}) works; Python's re has no \p."""
    schema = {"type": "string", "pattern": "^\\p{L}+$"}
    assert check_schema(schema) == []
    assert schema_errors("été", schema) == [] and schema_errors("été1", schema)


@pytest.mark.parametrize(
    "schema, says",
    [
        ({"type": "string", "pattern": "^(a)\\1$"}, "backreferences"),
        ({"type": "string", "pattern": "^(?=a)a$"}, "lookaround"),
        ({"type": "string", "pattern": "(?<!a)b"}, "lookaround"),
        ({"properties": {"x": {"pattern": "(?!x)"}}}, "lookaround"),
        ({"patternProperties": {"^(?=a)": {}}}, "lookaround"),
        ({"$defs": {"p": {"pattern": "a{1001}"}}}, "RE2"),
        ({"type": "string", "pattern": "(unclosed"}, "RE2"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_saying_why(schema, says):
    """SEC-5: refused at save, with a message naming RE2 and what it does not support."""
    problems = check_schema(schema)
    assert problems and says in problems[0] and "RE2" in problems[0], problems


def test_pattern_properties_with_unevaluated_properties_are_refused():
    """SEC-5: jsonschema evaluates that combination with Python's backtracking engine,
    so it is refused rather than run."""
    schema = {"patternProperties": {"^a": {}}, "allOf": [{"unevaluatedProperties": False}]}
    problems = check_schema(schema)
    assert problems and "unevaluatedProperties" in problems[0]
    assert schema_errors({"a": 1}, schema)  # a stored one fails closed


def test_a_stored_pattern_re2_cannot_run_fails_validation_instead_of_running():
    """SEC-5: a schema stored before this check is never run on a backtracking engine."""
    assert schema_errors("aa", {"type": "string", "pattern": "^(a)\\1$"})
    assert schema_errors({"a": 1}, {"patternProperties": {"(?=a)": {}}, "additionalProperties": False})


def nested(depth: int) -> str:
    return "(" * depth + "report.id" + ")" * depth


@pytest.mark.parametrize(
    "expression",
    [
        nested(600),
        "[" * 600 + "report" + "]" * 600,
        "!" * 600 + "report",
        "report" + "[*].a" * 400,
        "{a: " * 300 + "report" + "}" * 300,
        nested(expressions.MAX_EXPRESSION_DEPTH + 1),
        "report.id || " * 400 + "report.id",
    ],
)
def test_too_deep_or_too_long_expressions_are_refused(expression):
    """SEC-5: a problem message, never a RecursionError, and evaluation refuses it too."""
    problem = expression_problem(expression)
    assert problem and ("deep" in problem or "long" in problem), problem
    with pytest.raises(ActionError) as caught:
        evaluate_mapping({"payload": expression}, {"report": {"id": "r"}})
    assert caught.value.code == "action_configuration_invalid"


@pytest.mark.parametrize(
    "expression",
    [
        nested(10),
        "join(':', ['takedown', decision.id])",
        "{reason_code: join('_', ['appeal', appeal_decision.outcome]), report_reference: report.public_reference}",
        "targets[?kind == 'post'].target_reference | [0]",
    ],
)
def test_ordinary_expressions_pass(expression):
    """SEC-5: the limits leave room for real mappings."""
    assert expression_problem(expression) is None


def test_an_expression_that_does_not_compile_is_a_problem():
    assert "not a JMESPath expression" in expression_problem("report.[")
    assert expression_problem(5) == "must be a JMESPath expression string"
