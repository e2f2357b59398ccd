"""Input mappings: JMESPath expressions over the run context (SPEC PREP-4)."""

from __future__ import annotations

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


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Messages for every way `value` breaks the JSON Schema `schema` (none: valid)."""
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema)
    return [error.message for error in validator.iter_errors(value)]


def check_schema(schema: Any) -> list[str]:
    """Messages for a JSON Schema that is not itself valid (none: usable)."""
    if not isinstance(schema, dict):
        return ["A JSON Schema must be an object."]
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        return [error.message]
    return []
