"""Components for the admin screens: publish action types (a definition and its
version 1) and publish new versions (retiring: `app.services.admin.retirement`). Each is a
configuration change for a second admin (SPEC FOUR-2, FOUR-4, `app.services.admin.changes`).

A version is immutable once published: how to call the platform (implementation
kind and reference, connection version), what it accepts and answers (input and
output JSON Schemas) and its approval policy. Delivery and prepare read versions
through `app.services.lifecycle.components`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.domain.config_changes import ChangeKind
from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.domain.expressions import check_schema
from app.domain.platform_kinds import PDS_KIND, PDS_REFERENCE, PLATFORM_KINDS, rest_reference_problems
from app.extensions import db
from app.models import ComponentDefinition, ComponentVersion, Connection, ConnectionVersion, OperatorUser
from app.models.components import IMPLEMENTATION_KINDS
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import (
    InvalidInput,
    add_with_unique_slug,
    clean_name,
    clean_slug,
    has_control_characters,
    latest_version,
    lock_owned,
    owned,
    parse_json_text,
    plausible_id,
)
from app.services.admin.names import name_component_side
from app.services.lifecycle.components import OPERATION_PATTERN
from app.services.uow import UnitOfWork, unit_of_work

APPROVAL_MODES = ("human", "bounded_auto")
MAX_SCHEMA_CHARS = 100_000
MAX_REFERENCE_CHARS = 500
MAX_REST_REFERENCE_CHARS = 8000  # a REST kind's reference holds its outcome mapping (PLAT-3)


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
    """

    implementation_kind: str
    implementation_reference: str
    connection_version_id: str
    input_schema: str
    output_schema: str
    approval_mode: str


@dataclass(frozen=True)
class ComponentVersionView:
    id: str
    version: int
    implementation_kind: str
    implementation_reference: str
    connection_version_id: str | None
    connection_label: str | None
    input_schema: Any
    output_schema: Any
    approval_mode: str | None
    retired_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class ComponentListing:
    definition: ComponentDefinition
    versions: list[ComponentVersionView]  # newest first

    @property
    def latest(self) -> ComponentVersionView | None:
        return self.versions[0] if self.versions else None


def _connection_labels(installation_id: str) -> dict[str, str]:
    rows = db.session.execute(
        select(ConnectionVersion.id, ConnectionVersion.version, Connection.name)
        .join(Connection, Connection.id == ConnectionVersion.connection_id)
        .where(ConnectionVersion.installation_id == installation_id)
    ).all()
    return {row.id: f"{row.name} v{row.version}" for row in rows}


def _view(version: ComponentVersion, labels: dict[str, str]) -> ComponentVersionView:
    return ComponentVersionView(
        id=version.id,
        version=version.version,
        implementation_kind=version.implementation_kind,
        implementation_reference=version.implementation_reference,
        connection_version_id=version.connection_version_id,
        connection_label=labels.get(version.connection_version_id or ""),
        input_schema=version.input_schema,
        output_schema=version.output_schema,
        approval_mode=version.approval_policy.get("mode"),
        retired_at=version.retired_at,
        created_at=version.created_at,
    )


def list_components(installation_id: str) -> list[ComponentListing]:
    """The installation's component definitions by name, each with its versions."""
    labels = _connection_labels(installation_id)
    definitions = db.session.scalars(
        select(ComponentDefinition)
        .where(ComponentDefinition.installation_id == installation_id)
        .order_by(ComponentDefinition.name, ComponentDefinition.id)
    ).all()
    versions: dict[str, list[ComponentVersionView]] = {}
    for version in db.session.scalars(
        select(ComponentVersion)
        .where(ComponentVersion.installation_id == installation_id)
        .order_by(ComponentVersion.definition_id, ComponentVersion.version.desc())
    ):
        versions.setdefault(version.definition_id, []).append(_view(version, labels))
    return [ComponentListing(d, versions.get(d.id, [])) for d in definitions]


def component_detail(installation_id: str, definition_id: str) -> ComponentListing:
    """One component definition of the installation with its versions.

    Raises:
        ApiError: 404 ``component_not_found`` (also for another installation's).
    """
    definition = db.session.get(ComponentDefinition, definition_id) if plausible_id(definition_id) else None
    if definition is None or definition.installation_id != installation_id:
        raise ApiError(404, "component_not_found", "No such component.")
    labels = _connection_labels(installation_id)
    versions = [
        _view(v, labels)
        for v in db.session.scalars(
            select(ComponentVersion)
            .where(ComponentVersion.definition_id == definition.id, ComponentVersion.installation_id == installation_id)
            .order_by(ComponentVersion.version.desc())
        )
    ]
    return ComponentListing(definition, versions)


def component_version_choices(installation_id: str) -> list[tuple[str, str]]:
    """(id, label) of every component version of the installation, for a select."""
    rows = db.session.execute(
        select(ComponentVersion.id, ComponentVersion.version, ComponentVersion.retired_at, ComponentDefinition.name)
        .join(ComponentDefinition, ComponentDefinition.id == ComponentVersion.definition_id)
        .where(ComponentVersion.installation_id == installation_id)
        .order_by(ComponentDefinition.name, ComponentVersion.version.desc())
    ).all()
    return [(r.id, f"{r.name} v{r.version}{' (retired)' if r.retired_at else ''}") for r in rows]


def _local_ref_problems(schema: Any) -> list[str]:
    """References a schema makes must resolve inside it: nothing is fetched."""
    problems: list[str] = []
    anchors: set[str] = set()
    refs: list[str] = []
    stack = [schema]
    while stack and len(problems) < 20:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef"):
                    if isinstance(value, str):
                        refs.append(value)
                    else:
                        problems.append(f"{key} must be a string.")
                elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    anchors.add(value)
                if isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(item for item in node if isinstance(item, dict | list))
    for ref in refs:
        if not ref.startswith("#"):
            problems.append(f"{ref[:100]!r}: only references inside the schema (starting with #) are allowed.")
        elif ref.startswith("#/") or ref == "#":
            if not _pointer_resolves(schema, ref[1:]):
                problems.append(f"{ref[:100]!r} points to nothing in the schema.")
        elif ref[1:] not in anchors:
            problems.append(f"{ref[:100]!r} names no $anchor in the schema.")
    return problems


def _pointer_resolves(document: Any, pointer: str) -> bool:
    from urllib.parse import unquote

    node = document
    for token in pointer.split("/")[1:] if pointer else []:
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def _schema(text: Any, which: str) -> Any:
    code = f"component_{which}_schema_invalid"
    field = f"{which}_schema"
    label = f"The {which} schema"
    schema, _ = parse_json_text(text, code=code, field=field, label=label, max_chars=MAX_SCHEMA_CHARS)
    if isinstance(schema, dict) and "$schema" in schema and not isinstance(schema["$schema"], str):
        problems = ["$schema must be a string (the URI of a JSON Schema dialect)."]
    else:  # the specific reference messages first, then the meta-schema and trial evaluation
        problems = (_local_ref_problems(schema) if isinstance(schema, dict) else []) or check_schema(schema)
    if problems:
        raise InvalidInput(400, code, f"{label} is not a usable JSON Schema.", field, problems)
    return schema


def _clean_spec(spec: ComponentSpec, installation_id: str, uow: UnitOfWork) -> dict[str, Any]:
    """Validate a spec; the version's columns."""
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
    input_schema = _schema(spec.input_schema, "input")
    output_schema = _schema(spec.output_schema, "output")
    if spec.approval_mode not in APPROVAL_MODES:
        raise ApiError(400, "approval_policy_invalid", "The approval policy is human or bounded_auto.", "approval_mode")
    return {
        "implementation_kind": spec.implementation_kind,
        "implementation_reference": reference,
        "connection_version_id": connection.id,
        "input_schema": input_schema,
        "output_schema": output_schema,
        "approval_policy": {"mode": spec.approval_mode},
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


def _audit_details(version: ComponentVersion) -> dict[str, Any]:
    return {
        "version_id": version.id,
        "version": version.version,
        "implementation_kind": version.implementation_kind,
        "implementation_reference": version.implementation_reference,
        "connection_version_id": version.connection_version_id,
        "approval_policy": version.approval_policy,
    }


def _parse_schema(text: Any, which: str) -> Any:
    schema, _ = parse_json_text(
        text,
        code=f"component_{which}_schema_invalid",
        field=f"{which}_schema",
        label=f"The {which} schema",
        max_chars=MAX_SCHEMA_CHARS,
    )
    return schema


def _spec_content(spec: ComponentSpec) -> dict[str, Any]:
    """A spec as a change's content (schemas parsed); `_clean_spec` checks it fully when it applies."""
    reference = spec.implementation_reference
    return {
        "implementation_kind": spec.implementation_kind,
        "implementation_reference": reference.strip() if isinstance(reference, str) else reference,
        "connection_version_id": spec.connection_version_id,
        "input_schema": _parse_schema(spec.input_schema, "input"),
        "output_schema": _parse_schema(spec.output_schema, "output"),
        "approval_mode": spec.approval_mode,
    }


def _columns(uow: UnitOfWork, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    spec = ComponentSpec(
        implementation_kind=content["implementation_kind"],
        implementation_reference=content["implementation_reference"],
        connection_version_id=content["connection_version_id"],
        input_schema=canonical_json(content["input_schema"]),
        output_schema=canonical_json(content["output_schema"]),
        approval_mode=content["approval_mode"],
    )
    return _clean_spec(spec, installation_id, uow)


def _apply_create(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    columns = _columns(uow, installation_id, content)
    definition = ComponentDefinition(
        installation_id=installation_id,
        name=content["name"],
        slug=content["slug"],
        effect_class="side_effecting",
        status="active",
    )
    add_with_unique_slug(uow.session, definition, "A component")
    version = _add_version(uow, definition, 1, columns)
    uow.audit(
        installation_id,
        f"admin:component-created:{definition.id}",
        "admin.component_created",
        context.actor,
        "component_definition",
        definition.id,
        context.details({"name": content["name"], "slug": content["slug"], **_audit_details(version)}),
    )
    return {"definition_id": definition.id, "version_id": version.id}


def _lock_definition(session, installation_id: str, definition_id: Any) -> ComponentDefinition:
    return lock_owned(session, ComponentDefinition, definition_id, installation_id, "component_not_found", "component")


def _current_version(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    definition = owned(
        session, ComponentDefinition, content["definition_id"], installation_id, "component_not_found", "component"
    )
    latest = latest_version(session, ComponentVersion, ComponentVersion.definition_id, definition.id)
    current: dict[str, Any] = {"component": definition.name, "version": latest.version if latest else 0}
    if latest is not None:
        current |= {
            "implementation_kind": latest.implementation_kind,
            "implementation_reference": latest.implementation_reference,
            "connection_version_id": latest.connection_version_id,
            "input_schema": latest.input_schema,
            "output_schema": latest.output_schema,
            "approval_mode": latest.approval_policy.get("mode"),
        }
    return current


def _apply_version(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    definition = _lock_definition(uow.session, installation_id, content["definition_id"])
    columns = _columns(uow, installation_id, content)
    latest = latest_version(uow.session, ComponentVersion, ComponentVersion.definition_id, definition.id)
    version = _add_version(uow, definition, (latest.version if latest else 0) + 1, columns)
    uow.audit(
        installation_id,
        f"admin:component-version-created:{version.id}",
        "admin.component_version_created",
        context.actor,
        "component_definition",
        definition.id,
        context.details(_audit_details(version)),
    )
    return {"definition_id": definition.id, "version_id": version.id}


COMPONENT_CREATE = ChangeType(
    kind=ChangeKind.COMPONENT_CREATE,
    subject_type="component_definition",
    subject=lambda content: None,
    current=lambda session, installation_id, content: None,
    summary=lambda content, current: f"New component {content['name']!r} ({content['approval_mode']})",
    apply=_apply_create,
    names=name_component_side,
)
COMPONENT_VERSION = ChangeType(
    kind=ChangeKind.COMPONENT_VERSION,
    subject_type="component_definition",
    subject=lambda content: content["definition_id"],
    current=_current_version,
    summary=lambda content, current: (
        f"Component {current['component']!r}: version {current['version'] + 1} ({content['approval_mode']})"
    ),
    apply=_apply_version,
    hidden=("definition_id",),
    names=name_component_side,
)


def create_component(
    operator: OperatorUser, *, name: str, slug: str, spec: ComponentSpec
) -> tuple[str, str] | PendingChange:
    """Create a side-effecting component definition and its version 1, or propose it
    (FOUR-2: a bounded_auto component waits for a second admin).

    Args:
        operator: the admin doing it (their installation owns the rows).
        name: 1..200 characters; slug: unique in the installation.
        spec: the first version.

    Returns:
        (definition id, version id), or the `PendingChange` stored.

    Raises:
        ApiError: 400 ``name_invalid``, ``slug_invalid``,
            ``component_implementation_kind_invalid``, ``component_operation_invalid``,
            ``connection_version_invalid``, ``component_input_schema_invalid``,
            ``component_output_schema_invalid`` (with the list of problems),
            ``approval_policy_invalid``; 409 ``slug_taken``.
    """
    content = {"name": clean_name(name), "slug": clean_slug(slug), **_spec_content(spec)}
    with unit_of_work() as uow:
        outcome = submit(uow, operator, COMPONENT_CREATE, content)
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else (outcome["definition_id"], outcome["version_id"])


def create_component_version(operator: OperatorUser, definition_id: str, spec: ComponentSpec) -> str | PendingChange:
    """Publish a new version of a component of the operator's installation, or propose
    it (FOUR-2: a bounded_auto version waits for a second admin).

    Workflows keep using the version their graph names; edit the workflow to use
    the new one.

    Returns:
        The new version's id, or the `PendingChange` stored.

    Raises:
        ApiError: 404 ``component_not_found``; the 400 codes of `create_component`;
            409 ``version_conflict`` when another version was saved at the same moment.
    """
    with unit_of_work() as uow:
        _lock_definition(uow.session, operator.installation_id, definition_id)  # 404 before the form's checks
        content = {"definition_id": definition_id, **_spec_content(spec)}
        outcome = submit(uow, operator, COMPONENT_VERSION, content)
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else outcome["version_id"]


def _add_version(
    uow: UnitOfWork, definition: ComponentDefinition, number: int, columns: dict[str, Any]
) -> ComponentVersion:
    version = ComponentVersion(
        installation_id=definition.installation_id, definition_id=definition.id, version=number, **columns
    )
    uow.session.add(version)
    try:
        uow.session.flush()
    except IntegrityError as error:
        raise ApiError(409, "version_conflict", "Another version was saved at the same moment. Try again.") from error
    return version
