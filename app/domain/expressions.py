"""Input mappings: JMESPath expressions over the run context (SPEC PREP-4)."""

from __future__ import annotations

import re
from typing import Any

import jmespath
import jsonschema
from jmespath.exceptions import JMESPathError

from .errors import ActionError


def evaluate_mapping(mapping: dict[str, str], context: dict[str, Any]) -> dict[str, Any]:
    """Evaluate each JMESPath expression of a node's input mapping.

    Args:
        mapping: output key -> JMESPath expression.
        context: {report, targets, decision, appeal, run} as plain JSON values.

    Raises:
        ActionError: ``action_configuration_invalid`` when the mapping is not an
            object of strings or an expression does not compile or evaluate.
    """
    if not isinstance(mapping, dict):
        raise ActionError("action_configuration_invalid")
    result: dict[str, Any] = {}
    for key, expression in mapping.items():
        if not isinstance(expression, str):
            raise ActionError("action_configuration_invalid")
        try:
            result[key] = jmespath.search(expression, context)
        except JMESPathError as error:
            raise ActionError("action_configuration_invalid") from error
    return result


# A group holding a quantifier, itself quantified: "(a+)+", "(\\w*)*" — the classic
# catastrophic-backtracking shape. A heuristic: it refuses the common cases only.
NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:[^()\\]|\\.)*\)\s*[+*{]")
SAMPLE_INSTANCES = ({}, [], "", "sample", 0, 1.5, None, True, {"a": [1, {"b": "c"}]})


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Messages for every way `value` breaks the JSON Schema `schema` (none: valid).

    A schema that cannot be evaluated (cyclic or dangling references) reports an
    error instead of raising: the value is not shown to be valid.
    """
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        return [error.message for error in validator.iter_errors(value)]
    except Exception as error:  # cyclic or dangling references, recursion: the schema is unusable
        return [f"the schema cannot be evaluated ({type(error).__name__})"]


def check_schema(schema: Any) -> list[str]:
    """Messages for a JSON Schema that is not itself usable (none: usable).

    Beyond the meta-schema: every reference must let sample values be evaluated,
    and no ``pattern`` may have the nested-quantifier shape that backtracks
    catastrophically.
    """
    if not isinstance(schema, dict):
        return ["A JSON Schema must be an object."]
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        return [error.message]
    except RecursionError:
        return ["The schema is nested too deeply."]
    problems = [
        f"The pattern {p[:80]!r} may backtrack catastrophically; simplify it."
        for p in _patterns(schema)
        if NESTED_QUANTIFIER.search(p)
    ]
    for sample in SAMPLE_INSTANCES:
        trial = schema_errors(sample, schema)
        if trial and trial[0].startswith("the schema cannot be evaluated"):
            problems.append(f"The schema cannot be used to validate values: {trial[0]}.")
            break
    return problems


def _patterns(schema: Any) -> list[str]:
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.append(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    found.extend(k for k in value if isinstance(k, str))
                if isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found
