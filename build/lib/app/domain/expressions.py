"""What administrators write that runs later: JMESPath input mappings over the run
context (SPEC PREP-4) and JSON Schemas, both within limits (SEC-5).

JMESPath expressions have a size and a nesting-depth limit, checked when they are
saved and again before they run. JSON Schema patterns (``pattern``,
``patternProperties``) run on RE2, a linear-time engine, through validator classes
extended with RE2 keywords: no input can make a pattern backtrack.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from typing import Any

import jmespath
import jsonschema
import re2
from jmespath.exceptions import JMESPathError
from jmespath.lexer import Lexer
from jsonschema.exceptions import ValidationError

from .errors import ActionError

MAX_EXPRESSION_CHARS = 2000
MAX_EXPRESSION_DEPTH = 30
TOO_DEEP = f"is nested too deeply (at most {MAX_EXPRESSION_DEPTH} levels)"
_OPENING_TOKENS = {"lbracket", "lparen", "lbrace", "filter"}
_CLOSING_TOKENS = {"rbracket", "rparen", "rbrace"}


def expression_problem(expression: Any) -> str | None:
    """Why a JMESPath expression may not be saved or run (SEC-5), or None.

    The limits: at most 2,000 characters and 30 levels of nesting, counted both
    as brackets in the text and as depth of the parsed tree (evaluation recurses
    once per level).

    Args:
        expression: the expression as stored.

    Returns:
        A phrase to follow the expression's name ("is nested too deeply ..."), or None.
    """
    if not isinstance(expression, str):
        return "must be a JMESPath expression string"
    return _checked(expression)[1]


@lru_cache(maxsize=1024)
def _checked(expression: str) -> tuple[Any, str | None]:
    """An expression string compiled and checked once: (compiled or None, problem).
    A batch evaluates the same few expressions for every item (BULK-3)."""
    problem = _problem(expression)
    return (None, problem) if problem is not None else (jmespath.compile(expression), None)


def _problem(expression: str) -> str | None:
    if len(expression) > MAX_EXPRESSION_CHARS:
        return f"is too long (at most {MAX_EXPRESSION_CHARS} characters)"
    try:
        if _bracket_depth(expression) > MAX_EXPRESSION_DEPTH:
            return TOO_DEEP
        parsed = jmespath.compile(expression)
    except JMESPathError as error:
        return f"is not a JMESPath expression ({error})"
    except RecursionError:  # unary operators or projections chained past the parser's stack
        return TOO_DEEP
    if _tree_depth(parsed.parsed) > MAX_EXPRESSION_DEPTH:
        return TOO_DEEP
    return None


def _bracket_depth(expression: str) -> int:
    """Deepest bracket nesting, from the lexer's tokens (no recursion)."""
    depth = deepest = 0
    for token in Lexer().tokenize(expression):
        if token["type"] in _OPENING_TOKENS:
            depth += 1
            deepest = max(deepest, depth)
        elif token["type"] in _CLOSING_TOKENS:
            depth -= 1
    return deepest


def _tree_depth(node: dict[str, Any]) -> int:
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in current.get("children", ()) if isinstance(child, dict))
    return deepest


def evaluate_mapping(mapping: dict[str, str], context: dict[str, Any]) -> dict[str, Any]:
    """Evaluate each JMESPath expression of a node's input mapping.

    Args:
        mapping: output key -> JMESPath expression.
        context: {report, targets, decision, appeal, run} as plain JSON values.

    Raises:
        ActionError: ``action_configuration_invalid`` when the mapping is not an
            object of strings, or an expression is over the limits (SEC-5), does
            not compile or does not evaluate.
    """
    if not isinstance(mapping, dict):
        raise ActionError("action_configuration_invalid")
    result: dict[str, Any] = {}
    for key, expression in mapping.items():
        if expression_problem(expression) is not None:  # stored before the limits, or edited
            raise ActionError("action_configuration_invalid")
        try:
            result[key] = _checked(expression)[0].search(context)
        except JMESPathError as error:
            raise ActionError("action_configuration_invalid") from error
    return result


# --- JSON Schemas on RE2 ------------------------------------------------------------

SAMPLE_INSTANCES = ({}, [], "", "sample", 0, 1.5, None, True, {"a": [1, {"b": "c"}]})
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # refusals are reported to the admin, not to stderr
RE2_REFUSAL = (
    "The pattern {pattern!r} cannot be used: patterns run on RE2, a linear-time engine without "
    "backreferences or lookaround (RE2 says: {reason})."
)
UNEVALUATED_WITH_PATTERNS = (
    "unevaluatedProperties cannot be combined with patternProperties here: that combination "
    "would run the patterns on a backtracking engine instead of RE2."
)


class PatternUnusable(Exception):
    """A pattern RE2 cannot compile; the message says so to an administrator."""


def _re2(pattern: Any):
    """The compiled RE2 pattern (the re2 module keeps an LRU cache of them).

    Raises:
        PatternUnusable: RE2 refuses it (backreferences, lookaround, bad syntax).
    """
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except (re2.error, TypeError) as error:
        reason = error.args[0] if error.args else error
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        raise PatternUnusable(RE2_REFUSAL.format(pattern=str(pattern)[:80], reason=reason)) from error


def _pattern(validator, pattern, instance, schema):
    if not validator.is_type(instance, "string"):
        return
    try:
        compiled = _re2(pattern)
    except PatternUnusable as error:
        yield ValidationError(str(error))
        return
    if not compiled.search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _compiled_patterns(patterns) -> list:
    return [(pattern, _re2(pattern)) for pattern in patterns]


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    try:
        compiled = _compiled_patterns(patterns)
    except PatternUnusable as error:
        yield ValidationError(str(error))
        return
    for pattern, regex in compiled:
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, patterns[pattern], path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    """jsonschema's additionalProperties, with the patternProperties it skips matched on RE2."""
    if not validator.is_type(instance, "object"):
        return
    try:
        compiled = [regex for _, regex in _compiled_patterns(schema.get("patternProperties", {}))]
    except PatternUnusable as error:
        yield ValidationError(str(error))
        return
    properties = schema.get("properties", {})
    extras = sorted(
        (key for key in instance if key not in properties and not any(r.search(key) for r in compiled)), key=str
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            verb = "does" if len(extras) == 1 else "do"
            yield ValidationError(f"{', '.join(map(repr, extras))} {verb} not match any of the regexes: {patterns}")
        else:
            names, verb = ", ".join(map(repr, extras)), "was" if len(extras) == 1 else "were"  # jsonschema's wording
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


_RE2_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


def _validator(schema: dict[str, Any]):
    """The RE2 validator of `schema`, built once per schema text (a batch checks
    thousands of payloads against one schema, BULK-3)."""
    last = _LAST_VALIDATOR.get("schema")
    if last is not None and last[0] is schema:  # the same (immutable, SEC-5) schema object again
        return last[1]
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return _re2_validator_class(jsonschema.validators.validator_for(schema))(schema)
    validator = _validator_of_text(text)
    _LAST_VALIDATOR["schema"] = (schema, validator)
    return validator


_LAST_VALIDATOR: dict[str, tuple[Any, Any]] = {}


@lru_cache(maxsize=256)
def _validator_of_text(text: str):
    schema = json.loads(text)
    return _re2_validator_class(jsonschema.validators.validator_for(schema))(schema)


@cache
def _re2_validator_class(base):
    """`base` (a jsonschema validator class) with its regex keywords on RE2."""
    keywords = {name: check for name, check in _RE2_KEYWORDS.items() if name in base.VALIDATORS}
    return jsonschema.validators.extend(base, keywords)


@cache
def _re2_format_checker(base) -> jsonschema.FormatChecker:
    """`base`'s format checker with ``regex`` meaning "RE2 compiles it"."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=PatternUnusable)(_compiles_on_re2)
    return checker


def _compiles_on_re2(value: Any) -> bool:
    if isinstance(value, str):
        _re2(value)
    return True


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Messages for every way `value` breaks the JSON Schema `schema` (none: valid).

    Patterns run on RE2 (SEC-5). A schema that cannot be evaluated (cyclic or
    dangling references, patterns RE2 refuses, patternProperties with
    unevaluatedProperties) reports an error instead of raising: the value is not
    shown to be valid.
    """
    try:
        if _uses_unevaluated_with_patterns(schema):
            return [f"the schema cannot be evaluated: {UNEVALUATED_WITH_PATTERNS}"]
        return [error.message for error in _validator(schema).iter_errors(value)]
    except Exception as error:  # cyclic or dangling references, recursion: the schema is unusable
        return [f"the schema cannot be evaluated ({type(error).__name__})"]


def check_schema(schema: Any) -> list[str]:
    """Messages for a JSON Schema that is not itself usable (none: usable).

    Beyond the meta-schema (whose ``regex`` format is checked with RE2): every
    pattern must compile on RE2, which refuses backreferences and lookaround (SEC-5);
    and every reference must let sample values be evaluated.
    """
    if not isinstance(schema, dict):
        return ["A JSON Schema must be an object."]
    problems = _pattern_problems(schema)
    if problems:
        return problems
    try:
        base = jsonschema.validators.validator_for(schema)
        base.check_schema(schema, format_checker=_re2_format_checker(base))
    except jsonschema.SchemaError as error:
        return [error.message]
    except RecursionError:
        return ["The schema is nested too deeply."]
    for sample in SAMPLE_INSTANCES:
        trial = schema_errors(sample, schema)
        if trial and trial[0].startswith("the schema cannot be evaluated"):
            problems.append(f"The schema cannot be used to validate values: {trial[0]}.")
            break
    return problems


def _pattern_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    for pattern in _patterns(schema):
        try:
            _re2(pattern)
        except PatternUnusable as error:
            problems.append(str(error))
    if _uses_unevaluated_with_patterns(schema):
        problems.append(UNEVALUATED_WITH_PATTERNS)
    return problems


def _nodes(schema: Any):
    """Every object inside `schema` (no recursion: schemas can be nested deeply)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(value for value in node.values() if isinstance(value, dict | list))
        elif isinstance(node, list):
            stack.extend(node)


def _patterns(schema: Any) -> list[str]:
    found = []
    for node in _nodes(schema):
        if isinstance(node.get("pattern"), str):
            found.append(node["pattern"])
        if isinstance(node.get("patternProperties"), dict):
            found.extend(key for key in node["patternProperties"] if isinstance(key, str))
    return found


def _uses_unevaluated_with_patterns(schema: Any) -> bool:
    # jsonschema finds the properties patternProperties evaluated with Python's re.
    keys = {key for node in _nodes(schema) for key in node}
    return "unevaluatedProperties" in keys and "patternProperties" in keys
