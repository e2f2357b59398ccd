"""API request bodies checked against the schemas the OpenAPI document publishes.

One contract: the body of each operation is validated by jsonschema against the
``requestBody`` schema in `openapi_document`, its ``$ref`` s into
``#/components/schemas/...`` resolved by `referencing`. What follows here only turns
the first schema error into the error code and message the API has always answered
with (SPEC API-1, API-3, REV-1).

What JSON Schema cannot say stays in the domain and is called from here:
* a reference with an invisible, bidirectional or lookalike character (FOUR-10): the
  document marks reference fields ``x-reference``, a keyword this validator checks
  with `app.domain.text_safety.reference_problem`;
* evidence errors carry the domain's own codes and messages (``url_userinfo``, a
  real date): `app.domain.evidence.parse_evidence` names them;
* a receipt naming another operation or digest than its proposal (API-3) needs the
  proposal, so `app.domain.receipts.parse_receipt` checks it in the service.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from app.domain.errors import ApiError
from app.domain.evidence import EvidenceInvalid, parse_evidence
from app.domain.text_safety import reference_problem
from app.services.lifecycle.receipt_intake import FIELD_MESSAGES

from .openapi import REFERENCE, openapi_document

DOCUMENT_URI = "urn:action-console:openapi"
IDENTITY_MISMATCH = "The result must match the immutable action operation, payload digest and receipt format."


@dataclass(frozen=True)
class Refusal:
    """How a refused field reads: its message, and the status and code when they are
    not the operation's own; `field` is the field named instead of the one at fault
    (``""``: none, as for a receipt's identity, API-3)."""

    message: str
    status: int = 400
    code: str | None = None
    field: str | None = None


@dataclass(frozen=True)
class Contract:
    """One operation's refusals, as the API answered them before (API-1).

    `refusals` is keyed by a field's path with ``[]`` for any index
    (``targets[]`` is any target); a field not listed gets a message made from its
    schema (e.g. ``queue must be text of at most 100 characters.``).
    """

    code: str
    not_object: str
    names_unknown_field: bool
    refusals: dict[str, Refusal] = field(default_factory=dict)


CONTRACTS = {
    "postReport": Contract(
        "report_invalid",
        "Send a JSON object.",
        names_unknown_field=True,
        refusals={
            "targets": Refusal("targets must list 1 to 50 targets."),
            "targets[]": Refusal(
                "Each target needs a reference like 'post:123', an optional kind and optional evidence.",
                field="targets",
            ),
            "source": Refusal(  # DSA-2
                "source must be trusted_flagger, other_notification or automated_detection; leave it out for"
                " a user's notice (Article 16)."
            ),
        },
    ),
    "postActionResult": Contract(
        "action_result_invalid",
        "Send a JSON object with the receipt fields.",
        names_unknown_field=False,
        refusals={
            "action_id": Refusal("An action_id of 1 to 500 characters is required."),
            "status": Refusal("The status must be applied or failed."),
            # a receipt that cannot name its proposal's operation or digest (API-3)
            "operation_id": Refusal(IDENTITY_MISMATCH, 409, "action_result_identity_mismatch", ""),
            "payload_digest": Refusal(IDENTITY_MISMATCH, 409, "action_result_identity_mismatch", ""),
            **{name: Refusal(message) for name, message in FIELD_MESSAGES.items()},
        },
    ),
    "postAppeal": Contract(
        "appeal_invalid",
        "Send a JSON object with report_external_id, external_id and statement.",
        names_unknown_field=False,
        refusals={
            "external_id": Refusal("external_id must be 1 to 200 characters.", code="appeal_external_id_invalid"),
            "statement": Refusal(
                "Statement must be text of at most 5,000 characters.", code="appeal_statement_invalid"
            ),
        },
    ),
}


def check_body(operation_id: str, body: Any) -> None:
    """Refuse a request body its operation's published schema does not accept.

    Args:
        operation_id: the OpenAPI ``operationId`` (``postReport``,
            ``postActionResult``, ``postAppeal``).
        body: the decoded JSON body (any JSON value).

    Raises:
        ApiError: 400 with the operation's code (``report_invalid``,
            ``action_result_invalid``, ``appeal_invalid``) naming the field at fault;
            ``report_evidence_invalid`` / ``url_userinfo`` for evidence (REV-1,
            FOUR-10); ``reference_characters`` (FOUR-10); 409
            ``action_result_identity_mismatch`` for a malformed operation_id or
            payload_digest (API-3). FOUR-10 findings come first, then the fields in
            the order the schema lists them.
    """
    contract = CONTRACTS[operation_id]
    order = field_order(operation_id)
    errors = sorted(body_validator(operation_id).iter_errors(body), key=lambda error: _rank(error, order))
    if errors:
        raise _refusal(contract, errors[0], body)


@cache
def _document() -> tuple[dict, Registry]:
    """The OpenAPI document, and a registry holding it under `DOCUMENT_URI`."""
    document = openapi_document()
    return document, Registry().with_resource(DOCUMENT_URI, DRAFT202012.create_resource(document))


@cache
def body_validator(operation_id: str) -> jsonschema.Validator:
    """The validator of `operation_id`'s request body, its ``$ref`` s resolved in
    the OpenAPI document (JSON Schema 2020-12, as OpenAPI 3.1 says)."""
    document, registry = _document()
    validator_class = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, {REFERENCE: _reference_keyword, "pattern": _ecma_pattern}
    )
    return validator_class({"$ref": _request_schema_uri(document, operation_id)}, registry=registry)


def _request_schema_uri(document: dict, operation_id: str) -> str:
    """Where the operation's ``application/json`` request schema is, as a URI with
    a JSON pointer into the document."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if operation.get("operationId") == operation_id:
                escaped = path.replace("~", "~0").replace("/", "~1")
                return f"{DOCUMENT_URI}#/paths/{escaped}/{method}/requestBody/content/application~1json/schema"
    raise KeyError(operation_id)


@cache
def _python_regex(pattern: str) -> re.Pattern:
    """A published pattern as ECMA-262 reads it (JSON Schema's dialect): ``$`` is the
    end of the string. Python's ``$`` also matches before a final newline, so
    ``"post:77\\n"`` would pass ``^...$`` here while every client refuses it."""
    out, in_class, escaped = [], False, False
    for character in pattern:
        if escaped:
            escaped = False
        elif character == "\\":
            escaped = True
        elif character in "[]":
            in_class = character == "["
        elif character == "$" and not in_class:
            character = "\\Z"
        out.append(character)
    return re.compile("".join(out))


def _ecma_pattern(validator, pattern: str, instance: Any, schema: dict):
    """``pattern`` with ECMA-262's ``$`` (API-1: the server refuses what the document refuses)."""
    if validator.is_type(instance, "string") and not _python_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _reference_keyword(validator, enabled: bool, instance: Any, schema: dict):
    """``x-reference``: a reference must not hold characters that would make it look
    like another (FOUR-10)."""
    if enabled and isinstance(instance, str) and reference_problem(instance, "reference"):
        yield ValidationError("reference characters")


def _rank(error: ValidationError, order: list[str]) -> tuple[bool, int]:
    """FOUR-10 findings first; then by the top-level field in the schema's order
    (the body itself, e.g. not an object or an unknown field, before any field)."""
    name = _top_name(error)
    return (error.validator != REFERENCE, order.index(name) if name in order else -1)


@cache
def field_order(operation_id: str) -> list[str]:
    """The top-level properties of the operation's body schema, in document order."""
    document, registry = _document()
    resolved = registry.resolver().lookup(_request_schema_uri(document, operation_id))
    while "$ref" in resolved.contents:
        resolved = resolved.resolver.lookup(resolved.contents["$ref"])
    return list(resolved.contents.get("properties", {}))


def _top_name(error: ValidationError) -> str | None:
    if error.absolute_path:
        return error.absolute_path[0]
    return _missing(error) if error.validator == "required" else None


def _missing(error: ValidationError) -> str | None:
    """The first required property `error` (a ``required`` error) finds missing."""
    listed = error.schema.get("properties", {})
    missing = [name for name in error.validator_value if name not in error.instance]
    return min(missing, key=lambda name: list(listed).index(name) if name in listed else len(listed))


def _path(parts) -> str:
    """``targets[0].evidence.media[1].sha256`` from its JSON path parts."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


def _refusal(contract: Contract, error: ValidationError, body: Any) -> ApiError:
    parts = list(error.absolute_path)
    if error.validator == "required":
        parts.append(_missing(error))
    where = _path(parts)
    if error.validator == REFERENCE:
        return ApiError(400, "reference_characters", reference_problem(error.instance, where), where)
    if not parts:  # the body itself: not an object, or a field the contract does not know
        unknown = sorted(set(body) - set(error.schema.get("properties", {}))) if isinstance(body, dict) else []
        if unknown and contract.names_unknown_field:
            return ApiError(400, contract.code, f"Unknown field: {unknown[0]}.", unknown[0])
        return ApiError(400, contract.code, contract.not_object)
    evidence = _evidence_refusal(body, parts)
    if evidence is not None:
        return evidence
    key = _path(parts[:1]) + ("[]" if len(parts) > 1 and isinstance(parts[1], int) else "")
    refusal = contract.refusals.get(key) or Refusal(_message(where, _field_schema(error)))
    named = where if refusal.field is None else refusal.field or None
    return ApiError(refusal.status, refusal.code or contract.code, refusal.message, named)


def _field_schema(error: ValidationError) -> dict:
    """The schema of the field at fault (a ``required`` error's is its parent's entry)."""
    if error.validator == "required":
        return error.schema.get("properties", {}).get(_missing(error), {})
    return error.schema


def _message(where: str, schema: dict) -> str:
    """A message from the field's schema, worded as the API's hand checks were."""
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None and high is not None:
        return f"{where} must be {low} to {high} characters."
    if high is not None:
        return f"{where} must be text of at most {high} characters."
    if "enum" in schema:
        return f"{where} must be one of: {', '.join(map(str, schema['enum']))}."
    return f"{where} does not match the documented schema."


EVIDENCE_AT = re.compile(r"targets\[(\d+)\]\.evidence\b")


def _evidence_refusal(body: Any, parts: list) -> ApiError | None:
    """A target's evidence refused, named as the domain names it (REV-1, FOUR-10)."""
    match = EVIDENCE_AT.match(_path(parts))
    if match is None:
        return None
    where = match.group(0)
    try:
        parse_evidence(body["targets"][int(match.group(1))]["evidence"], where)
    except EvidenceInvalid as error:
        return ApiError(400, error.code, error.message, error.field)
    path = _path(parts)
    return ApiError(400, "report_evidence_invalid", f"{path} does not match the documented evidence.", path)
