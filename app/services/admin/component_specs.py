"""What a component version may say, checked before it is stored or proposed (SPEC
SEC-3, SEC-5, PLAT-1, PLAT-3): its implementation kind and reference, its connection
version, its input and output JSON Schemas and its approval policy.

A schema may only refer inside itself: `local_ref_problems` finds and resolves its
``$ref`` / ``$dynamicRef`` with `referencing`, the library `jsonschema` evaluates
them with, so a reference passes here exactly when the validator can follow it
without fetching anything. The change kinds that publish versions are in
`app.services.admin.components`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.domain.expressions import check_schema
from app.domain.platform_kinds import PDS_KIND, PDS_REFERENCE, PLATFORM_KINDS, rest_reference_problems
from app.models import ConnectionVersion
from app.models.components import IMPLEMENTATION_KINDS
from app.services.admin.input import InvalidInput, has_control_characters, parse_json_text, plausible_id
from app.services.lifecycle.action_targets import OPERATION_PATTERN
from app.services.uow import UnitOfWork

if TYPE_CHECKING:
    from referencing._core import Resolver  # what Registry.resolver returns

APPROVAL_MODES = ("human", "bounded_auto")
MAX_SCHEMA_CHARS = 100_000
MAX_REFERENCE_CHARS = 500
MAX_REST_REFERENCE_CHARS = 8000  # a REST kind's reference holds its outcome mapping (PLAT-3)
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
MAX_REFERENCE_PROBLEMS = 20
# A keyword of the wrong type (``"properties": 5``, ``"$id": 5``) stops `referencing`
# from walking or resolving; the meta-schema check of `check_schema` names it instead.
MALFORMED = (AttributeError, TypeError)


@dataclass(frozen=True)
class ComponentSpec:
    """A component version as typed into the form.

    Attributes:
        implementation_kind: ``webhook`` or ``external_api`` (the receipt contract),
            ``atproto_pds`` (a PDS's admin API, PLAT-1) or ``rest`` (PLAT-3).
        implementation_reference: for the receipt contract ``[POST|PUT|PATCH|DELETE] /path``,
            e.g. ``POST /actions/takedown`` (at most 500 characters); for
            ``atproto_pds`` ``takedown|reversal account|record``; for ``rest`` a JSON
            object (request, body, outcome, read_back; at most 8,000 characters,
            see `app.domain.platform_kinds.rest_reference_problems`).
        connection_version_id: a connection version of the same installation.
        input_schema, output_schema: JSON Schemas as JSON text (at most 100,000
            characters each).
        approval_mode: ``human`` (maker/checker) or ``bounded_auto``.
        irreversible: whether the action cannot be undone (no compensation exists,
            POL-5): routed by default to a stronger approval policy, and said so
            on the approval panel.
    """

    implementation_kind: str
    implementation_reference: str
    connection_version_id: str
    input_schema: str
    output_schema: str
    approval_mode: str
    irreversible: bool = False


def local_ref_problems(schema: dict[str, Any]) -> list[str]:
    """Messages for the references of a schema that do not resolve inside it (SEC-5).

    The schema's subschemas are walked and each ``$ref`` / ``$dynamicRef`` is looked
    up as `jsonschema` would (`referencing`, the schema's dialect, each embedded
    ``$id`` a resource of its own), with no retrieval: nothing is fetched.

    Args:
        schema: a JSON Schema object (parsed JSON).

    Returns:
        At most 20 messages; none when every reference resolves. A reference must be
        a string starting with ``#``: a JSON pointer (``#/$defs/code``) to something
        in the schema, or an ``$anchor`` / ``$dynamicAnchor`` name (``#code``).
        A malformed schema the walk cannot read gives none: `check_schema` refuses it.
    """
    try:
        root = Resource.from_contents(schema, default_specification=DRAFT202012)
        base_uri = root.id() or ""
        # crawled once, so each anchor look-up reads an index instead of walking again
        resolver = Registry().with_resource(base_uri, root).crawl().resolver(base_uri)
    except MALFORMED:
        return []
    problems: list[str] = []
    for contents, here in _subschemas(root, resolver):
        for keyword in REFERENCE_KEYWORDS:
            if keyword in contents:
                problem = _reference_problem(keyword, contents[keyword], here)
                problems += [problem] if problem else []
        if len(problems) >= MAX_REFERENCE_PROBLEMS:
            return problems[:MAX_REFERENCE_PROBLEMS]
    return problems


def _subschemas(root: Resource, resolver: Resolver) -> Iterator[tuple[dict[str, Any], Resolver]]:
    """Every schema object under `root` (itself included) with the resolver its
    references resolve against; iterative, as schemas can nest deeply."""
    stack = [(root, resolver)]
    while stack:
        resource, here = stack.pop()
        if not isinstance(resource.contents, dict):
            continue  # a boolean schema refers to nothing
        yield resource.contents, here
        try:
            stack.extend((sub, here.in_subresource(sub)) for sub in resource.subresources())
        except MALFORMED:
            continue


def _reference_problem(keyword: str, ref: Any, resolver: Resolver) -> str | None:
    if not isinstance(ref, str):
        return f"{keyword} must be a string."
    shown = repr(ref[:100])
    if not ref.startswith("#"):
        return f"{shown}: only references inside the schema (starting with #) are allowed."
    try:
        resolver.lookup(ref)
    except MALFORMED:
        return None
    except (Unresolvable, ValueError):  # ValueError: a list index that is not a number
        if ref == "#" or ref.startswith("#/"):
            return f"{shown} points to nothing in the schema."
        return f"{shown} names no $anchor in the schema."
    return None


def parse_schema(text: Any, which: str) -> Any:
    """A schema typed into the form, parsed (not yet checked).

    Args:
        text: JSON text, at most 100,000 characters.
        which: ``input`` or ``output``, for the error code and field.

    Raises:
        ApiError: 400 ``component_<which>_schema_invalid``.
    """
    schema, _ = parse_json_text(
        text,
        code=f"component_{which}_schema_invalid",
        field=f"{which}_schema",
        label=f"The {which} schema",
        max_chars=MAX_SCHEMA_CHARS,
    )
    return schema


def usable_schema(text: Any, which: str) -> Any:
    """A schema typed into the form, parsed and checked: its references first, then
    the meta-schema and a trial evaluation (`app.domain.expressions.check_schema`, SEC-5).

    Raises:
        InvalidInput: 400 ``component_<which>_schema_invalid`` with each problem listed.
    """
    schema = parse_schema(text, which)
    if isinstance(schema, dict) and "$schema" in schema and not isinstance(schema["$schema"], str):
        problems = ["$schema must be a string (the URI of a JSON Schema dialect)."]
    else:  # the specific reference messages first, then the meta-schema and trial evaluation
        problems = (local_ref_problems(schema) if isinstance(schema, dict) else []) or check_schema(schema)
    if problems:
        code, message = f"component_{which}_schema_invalid", f"The {which} schema is not a usable JSON Schema."
        raise InvalidInput(400, code, message, f"{which}_schema", problems)
    return schema


def clean_spec(spec: ComponentSpec, installation_id: str, uow: UnitOfWork) -> dict[str, Any]:
    """Validate a spec against the installation as it is now.

    Returns:
        The version's columns (implementation kind and reference, connection
        version id, schemas, approval policy).

    Raises:
        ApiError: 400 ``component_implementation_kind_invalid``,
            ``component_operation_invalid``, ``connection_version_invalid``,
            ``component_input_schema_invalid``, ``component_output_schema_invalid``,
            ``approval_policy_invalid``, ``component_irreversible_invalid``.
    """
    if spec.implementation_kind not in IMPLEMENTATION_KINDS:
        raise ApiError(
            400,
            "component_implementation_kind_invalid",
            "The implementation kind is webhook, external_api, atproto_pds or rest.",
            "implementation_kind",
        )
    reference = spec.implementation_reference.strip() if isinstance(spec.implementation_reference, str) else ""
    if spec.implementation_kind in PLATFORM_KINDS:
        _check_platform_reference(spec.implementation_kind, reference)
    elif (
        len(reference) > MAX_REFERENCE_CHARS
        or has_control_characters(reference)
        or not OPERATION_PATTERN.match(reference)
    ):
        raise ApiError(
            400,
            "component_operation_invalid",
            "Write the operation as a method and a path under the connection's base URL, e.g. "
            "POST /actions/takedown (POST, PUT, PATCH or DELETE; no spaces, no '..' or '//' in the path, "
            "never another scheme, host or port).",
            "implementation_reference",
        )
    connection = (
        uow.session.get(ConnectionVersion, spec.connection_version_id)
        if plausible_id(spec.connection_version_id)
        else None
    )
    if connection is None or connection.installation_id != installation_id:
        raise ApiError(
            400,
            "connection_version_invalid",
            "Choose one of this installation's connection versions.",
            "connection_version_id",
        )
    input_schema = usable_schema(spec.input_schema, "input")
    output_schema = usable_schema(spec.output_schema, "output")
    if spec.approval_mode not in APPROVAL_MODES:
        raise ApiError(400, "approval_policy_invalid", "The approval policy is human or bounded_auto.", "approval_mode")
    if not isinstance(spec.irreversible, bool):
        raise ApiError(400, "component_irreversible_invalid", "Irreversible is true or false.", "irreversible")
    return {
        "implementation_kind": spec.implementation_kind,
        "implementation_reference": reference,
        "connection_version_id": connection.id,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "approval_policy": {"mode": spec.approval_mode},
        "irreversible": spec.irreversible,  # POL-5
    }


def _check_platform_reference(kind: str, reference: str) -> None:
    """Validate a platform kind's reference at save (PLAT-1, PLAT-3, SEC-5).

    Raises:
        InvalidInput: 400 ``component_operation_invalid`` with each problem listed.
    """
    if kind == PDS_KIND:
        if not PDS_REFERENCE.match(reference):
            raise ApiError(
                400,
                "component_operation_invalid",
                "Write what the PDS component does as 'takedown account', 'takedown record', "
                "'reversal account' or 'reversal record'.",
                "implementation_reference",
            )
        return
    problems = (
        [f"the reference is too long (at most {MAX_REST_REFERENCE_CHARS} characters)"]
        if len(reference) > MAX_REST_REFERENCE_CHARS
        else rest_reference_problems(reference)
    )
    if problems:
        raise InvalidInput(
            400,
            "component_operation_invalid",
            "The REST reference is a JSON object with a request ('POST /path'), an outcome mapping status "
            "classes (2xx) or codes to JMESPath giving applied, accepted or failed, an optional body "
            "(JMESPath over the action) and an optional read_back (request, value, expected).",
            "implementation_reference",
            problems,
        )


def spec_content(spec: ComponentSpec) -> dict[str, Any]:
    """A spec as a change's content (schemas parsed); `content_columns` checks it fully
    when the change applies.

    Raises:
        ApiError: 400 ``component_input_schema_invalid``, ``component_output_schema_invalid``
            for schema text that is not JSON.
    """
    reference = spec.implementation_reference
    return {
        "implementation_kind": spec.implementation_kind,
        "implementation_reference": reference.strip() if isinstance(reference, str) else reference,
        "connection_version_id": spec.connection_version_id,
        "input_schema": parse_schema(spec.input_schema, "input"),
        "output_schema": parse_schema(spec.output_schema, "output"),
        "approval_mode": spec.approval_mode,
        "irreversible": bool(spec.irreversible),  # POL-5: part of the version, so of the change's digest
    }


def content_columns(uow: UnitOfWork, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """A change's content (`spec_content`) checked now, as the version's columns.

    Raises:
        ApiError: the 400 codes of `clean_spec`.
    """
    spec = ComponentSpec(
        implementation_kind=content["implementation_kind"],
        implementation_reference=content["implementation_reference"],
        connection_version_id=content["connection_version_id"],
        input_schema=canonical_json(content["input_schema"]),
        output_schema=canonical_json(content["output_schema"]),
        approval_mode=content["approval_mode"],
        irreversible=content.get("irreversible", False),  # a change stored before POL-5 declares nothing
    )
    return clean_spec(spec, installation_id, uow)
