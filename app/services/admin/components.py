"""Components for the admin screens: publish action types (a definition and its
version 1) and publish new versions (retiring: `app.services.admin.version_retirement`). Each is a
configuration change for a second admin (SPEC FOUR-2, FOUR-4, `app.services.admin.changes`).

A version is immutable once published: how to call the platform (implementation
kind and reference, connection version), what it accepts and answers (input and
output JSON Schemas) and its approval policy. Delivery and prepare read versions
through `app.services.lifecycle.action_targets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ComponentDefinition, ComponentVersion, Connection, ConnectionVersion, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.component_specs import ComponentSpec, content_columns, spec_content
from app.services.admin.input import (
    add_version,
    add_with_unique_slug,
    clean_name,
    clean_slug,
    latest_version,
    lock_owned,
    owned,
    plausible_id,
)
from app.services.admin.names import name_component_side
from app.services.uow import UnitOfWork, unit_of_work

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
    irreversible: bool  # POL-5
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
        irreversible=bool(version.irreversible),
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


def _audit_details(version: ComponentVersion) -> dict[str, Any]:
    return {
        "version_id": version.id,
        "version": version.version,
        "implementation_kind": version.implementation_kind,
        "implementation_reference": version.implementation_reference,
        "connection_version_id": version.connection_version_id,
        "approval_policy": version.approval_policy,
        "irreversible": bool(version.irreversible),
    }


def _apply_create(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    columns = content_columns(uow, installation_id, content)
    definition = ComponentDefinition(
        installation_id=installation_id,
        name=content["name"],
        slug=content["slug"],
        effect_class="side_effecting",
        status="active",
    )
    add_with_unique_slug(uow.session, definition, "A component")
    version = _new_version(uow, definition, 1, columns)
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
            "irreversible": bool(latest.irreversible),
        }
    return current


def _apply_version(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    definition = _lock_definition(uow.session, installation_id, content["definition_id"])
    columns = content_columns(uow, installation_id, content)
    latest = latest_version(uow.session, ComponentVersion, ComponentVersion.definition_id, definition.id)
    version = _new_version(uow, definition, (latest.version if latest else 0) + 1, columns)
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


def _modes(content: dict[str, Any]) -> str:
    """"human" or "human, irreversible" (POL-5) for a change's one-line summary."""
    return content["approval_mode"] + (", irreversible" if content.get("irreversible") else "")


COMPONENT_CREATE = ChangeType(
    kind=ChangeKind.COMPONENT_CREATE,
    subject_type="component_definition",
    summary=lambda content, current: f"New component {content['name']!r} ({_modes(content)})",
    apply=_apply_create,
    names=name_component_side,
)
COMPONENT_VERSION = ChangeType(
    kind=ChangeKind.COMPONENT_VERSION,
    subject_type="component_definition",
    subject="definition_id",
    current=_current_version,
    summary=lambda content, current: (
        f"Component {current['component']!r}: version {current['version'] + 1} ({_modes(content)})"
    ),
    apply=_apply_version,
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
    content = {"name": clean_name(name), "slug": clean_slug(slug), **spec_content(spec)}
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
        content = {"definition_id": definition_id, **spec_content(spec)}
        outcome = submit(uow, operator, COMPONENT_VERSION, content)
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else outcome["version_id"]



def _new_version(
    uow: UnitOfWork, definition: ComponentDefinition, number: int, columns: dict[str, Any]
) -> ComponentVersion:
    return add_version(
        uow.session,
        ComponentVersion(
            installation_id=definition.installation_id, definition_id=definition.id, version=number, **columns
        ),
    )
