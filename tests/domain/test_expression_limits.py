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


# --- the limits at their edges ------------------------------------------------------


def test_sec5_the_length_limit_is_2000_characters():
    """SEC-5: 2,000 characters are allowed, one more is refused by name."""
    at_limit = "report.id || " + "a" * (expressions.MAX_EXPRESSION_CHARS - len("report.id || "))
    assert len(at_limit) == 2000 and expression_problem(at_limit) is None
    assert expression_problem(at_limit + "a") == "is too long (at most 2000 characters)"


@pytest.mark.parametrize(
    "allowed, refused",
    [
        (nested(30), nested(31)),  # brackets in the text
        ("!" * 29 + "report", "!" * 30 + "report"),  # depth of the parsed tree
        (" || ".join(["report"] * 30), " || ".join(["report"] * 31)),
    ],
    ids=["brackets", "unary", "or-chain"],
)
def test_sec5_the_depth_limit_is_30_levels(allowed, refused):
    """SEC-5: 30 levels of nesting are allowed, 31 are refused, by brackets or by tree depth."""
    assert expression_problem(allowed) is None
    assert expression_problem(refused) == "is nested too deeply (at most 30 levels)"


@pytest.mark.parametrize(
    "expression",
    [
        "merge(" + ", ".join(["{a: report.id}"] * 40) + ")",  # brackets side by side: 2 levels
        "[report.id] || [report.id] || " + nested(30),
        "report[?id == 'r'] | " + nested(30),
    ],
)
def test_sec5_brackets_side_by_side_do_not_add_up(expression):
    """SEC-5: depth counts nesting, so a closed bracket no longer counts."""
    assert expression_problem(expression) is None


def test_sec5_a_closed_bracket_counts_once():
    """SEC-5: a bracket closed before a deep nest does not lower the nest's depth."""
    assert expression_problem("[report.id] || " + nested(31)) == expressions.TOO_DEEP
    assert expression_problem("report[?id == 'r'] || " + "[" * 30 + "report.id" + "]" * 30) == expressions.TOO_DEEP


def test_sec5_a_parser_recursion_is_reported_as_too_deep():
    """SEC-5: past the parser's stack the answer is the same phrase, not a RecursionError."""
    assert expression_problem("!" * 600 + "report") == "is nested too deeply (at most 30 levels)"


def test_sec5_an_expression_that_does_not_compile_says_why():
    problem = expression_problem("report.[")
    assert problem.startswith("is not a JMESPath expression (") and problem.endswith(")")
    assert "Expecting" in problem or "Invalid" in problem or "Unexpected" in problem, problem


# --- RE2 patterns: the same answers as jsonschema's own, on another engine ----------

SAME_AS_JSONSCHEMA = [
    ({"b": 1}, {"properties": {"a": {}}, "additionalProperties": False}),
    ({"b": 1, "c": 2, "a": 1}, {"properties": {"a": {}}, "additionalProperties": False}),
    ({"c": 1, "b": 1, "ab": 1}, {"patternProperties": {"^a": {}, "z": {}}, "additionalProperties": False}),
    ({"b": 1, "ab": 1}, {"patternProperties": {"^a": {}, "z": {}}, "additionalProperties": False}),
    ({"b": 1, "c": 2, "ab": 1}, {"patternProperties": {"^a": {}}, "additionalProperties": False}),
    (
        {"b": "x", "c": 2, "a": "s"},
        {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    ),
    (
        {"xa": "x", "b": 2, "ab": "y"},
        {"patternProperties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    ),
    (
        {"a1": 1, "zz": "x"},
        {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}},
    ),
    ({"b": 1}, {"additionalProperties": True}),
    ({"b": 1}, {"patternProperties": {"^a": {}}, "additionalProperties": True}),
    ({}, {"additionalProperties": False}),
    (5, {"additionalProperties": False, "patternProperties": {"a": {}}}),
    (5, {"patternProperties": {"a": {"type": "string"}}}),
    ({"a": 1}, {"properties": {"a": {"type": "string"}}}),
    ("abc", {"pattern": "b"}),
    ("abc", {"pattern": "^b"}),
    (5, {"pattern": "^b"}),
    (["abc", "b"], {"items": {"pattern": "^a"}}),
]


@pytest.mark.parametrize(("value", "schema"), SAME_AS_JSONSCHEMA)
def test_sec5_re2_keywords_answer_as_jsonschema_does(value, schema):
    """SEC-5: on patterns RE2 and Python's re agree on, the RE2 keywords report the same errors
    as jsonschema's own (message, where in the value, where in the schema, which keyword)."""
    import jsonschema

    base = jsonschema.validators.validator_for(schema)

    def described(validator):
        return sorted(
            (e.message, list(e.absolute_path), list(e.absolute_schema_path), e.validator)
            for e in validator.iter_errors(value)
        )

    assert described(expressions._re2_validator_class(base)(schema)) == described(base(schema))
    assert schema_errors(value, schema) == [e.message for e in base(schema).iter_errors(value)]


def test_sec5_a_pattern_is_searched_not_matched():
    """SEC-5: as in JSON Schema, an unanchored pattern may match anywhere in the string."""
    assert schema_errors("xxabxx", {"pattern": "ab"}) == []
    assert schema_errors("xxabxx", {"pattern": "^ab"}) == ["'xxabxx' does not match '^ab'"]
    assert schema_errors({"xxab": 1}, {"patternProperties": {"ab": {"type": "string"}}}) == [
        "1 is not of type 'string'"
    ]


def refusal(pattern: str, reason: str) -> str:
    return expressions.RE2_REFUSAL.format(pattern=pattern, reason=reason)


def test_sec5_a_pattern_re2_refuses_is_named_with_re2s_reason():
    """SEC-5: the administrator is told which pattern, that RE2 runs it, and what RE2 said."""
    assert check_schema({"pattern": "(?=a)"}) == [refusal("(?=a)", "invalid perl operator: (?=")]
    assert check_schema({"pattern": "(a)\\1"}) == [refusal("(a)\\1", "invalid escape sequence: \\1")]


def test_sec5_a_long_refused_pattern_is_cut_to_80_characters():
    pattern = "x" * 100 + "(?=a)"
    assert check_schema({"pattern": pattern}) == [refusal("x" * 80, "invalid perl operator: (?=")]


def test_sec5_every_refused_pattern_is_listed():
    """SEC-5: each unusable pattern once, wherever it sits (properties, lists, definitions)."""
    schema = {
        "properties": {"a": {"pattern": "(?=a)"}},
        "anyOf": [{"pattern": "(?!b)"}, {"items": [{"pattern": "(?<=c)"}]}],
        "patternProperties": {"^ok$": {}, "(?<!d)": {}},
    }
    problems = check_schema(schema)
    assert len(problems) == 4
    assert {p.split("'")[1] for p in problems} == {"(?=a)", "(?!b)", "(?<=c)", "(?<!d)"}


def test_sec5_refused_patterns_and_unevaluated_properties_are_both_reported():
    schema = {"patternProperties": {"(?=a)": {}}, "unevaluatedProperties": False}
    assert check_schema(schema) == [
        refusal("(?=a)", "invalid perl operator: (?="),
        expressions.UNEVALUATED_WITH_PATTERNS,
    ]


@pytest.mark.parametrize(
    "schema",
    [{"patternProperties": {"^a": {}}}, {"unevaluatedProperties": False}, {"properties": {"a": {}}}],
)
def test_sec5_unevaluated_properties_alone_or_pattern_properties_alone_are_usable(schema):
    assert check_schema(schema) == []


def test_sec5_a_stored_schema_with_both_fails_closed_saying_why():
    schema = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert schema_errors({"a": 1}, schema) == [
        f"the schema cannot be evaluated: {expressions.UNEVALUATED_WITH_PATTERNS}"
    ]


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        ("aa", {"pattern": "(?=a)"}),
        ({"a": 1}, {"patternProperties": {"(?=a)": {}}}),
        ({"a": 1}, {"patternProperties": {"(?=a)": {}}, "additionalProperties": False}),
    ],
)
def test_sec5_a_stored_pattern_re2_refuses_is_one_error_naming_it(value, schema):
    """SEC-5: validation with a stored unusable pattern fails with the refusal, never a pass or a raise."""
    errors = schema_errors(value, schema)
    assert refusal("(?=a)", "invalid perl operator: (?=") in errors
    assert all(e == errors[0] for e in errors)


def test_sec5_a_stored_pattern_of_the_wrong_type_fails_validation():
    """SEC-5: a non-string pattern is refused by RE2's type check, reported like any unusable pattern."""
    [error] = schema_errors("x", {"pattern": 5})
    assert error.startswith("The pattern '5' cannot be used: patterns run on RE2")
    assert check_schema({"pattern": 5}) == ["5 is not of type 'string'"]


def test_sec5_re2_keywords_leave_other_types_alone():
    """SEC-5: pattern checks strings only, patternProperties and additionalProperties objects only."""
    assert schema_errors(5, {"pattern": "(?=a)"}) == []
    assert schema_errors([1], {"patternProperties": {"(?=a)": {}}, "additionalProperties": False}) == []


def test_sec5_the_regex_format_means_re2_compiles_it():
    """SEC-5: the meta-schema's ``regex`` format is checked by RE2, so a pattern RE2 refuses
    cannot slip past the save check as a valid regex."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = expressions._re2_format_checker(base)
    assert checker.conforms("^a+$", "regex") and checker.conforms(5, "regex")
    assert not checker.conforms("(?=a)", "regex")
    assert base.FORMAT_CHECKER.conforms("(?=a)", "regex")  # Python's re would have let it through
    assert set(base.FORMAT_CHECKER.checkers) <= set(checker.checkers)
    assert checker.conforms("not a date", "date") is base.FORMAT_CHECKER.conforms("not a date", "date")


def test_sec5_check_schema_reports_a_schema_too_deep_to_check():
    schema = node = {}
    for _ in range(3000):
        node["items"] = {}
        node = node["items"]
    assert check_schema(schema) == ["The schema is nested too deeply."]


def test_sec5_a_schema_that_cannot_evaluate_samples_is_reported_once():
    [problem] = check_schema({"$ref": "#/$defs/missing"})
    assert problem.startswith("The schema cannot be used to validate values: the schema cannot be evaluated (")
    assert problem.endswith(").")
