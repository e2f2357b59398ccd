"""Action components and their connections, as delivery needs them (PREP-3, DLV-2)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.errors import ActionError
from app.domain.platform_kinds import PLATFORM_KINDS
from app.domain.proposal.destination import OPERATION_PATTERN, Operation, parse_operation  # noqa: F401 - re-exported
from app.domain.proposal.retirement import may_use_retired_version
from app.models import ComponentDefinition, ComponentVersion, ConnectionVersion


def load_action_component(
    session: Session, component_version_id: str, installation_id: str, prepared_with: Iterable[str] = ()
) -> ComponentVersion:
    """The component version an action uses, if it can act for this installation.

    Args:
        component_version_id: the version asked for; installation_id: the action's.
        prepared_with: the versions of the existing proposal this one repeats or
            follows (`prepared_versions`); a retired version is allowed only among
            them (`may_use_retired_version`, FOUR-7). Empty for new preparation.

    Raises:
        ActionError: ``action_component_unavailable`` when it does not exist, belongs
            to another installation, is retired (unless `prepared_with` holds it), its
            definition is not active or not side-effecting;
            ``action_component_implementation_invalid`` when it is not a webhook,
            external_api, atproto_pds or rest component with a connection (PREP-3, PLAT-1, PLAT-3).
    """
    version = session.get(ComponentVersion, component_version_id)
    definition = session.get(ComponentDefinition, version.definition_id) if version else None
    _check_component(version, definition, installation_id, prepared_with)
    return version


def _check_component(version, definition, installation_id: str, prepared_with: Iterable[str]) -> None:
    if (
        version is None
        or definition is None
        or version.installation_id != installation_id
        or (version.retired_at is not None and not may_use_retired_version(version.id, prepared_with))
        or definition.status != "active"
        or definition.effect_class != "side_effecting"
    ):
        raise ActionError("action_component_unavailable")
    kinds = ("webhook", "external_api", *PLATFORM_KINDS)
    if version.implementation_kind not in kinds or not version.connection_version_id:
        raise ActionError("action_component_implementation_invalid")


def load_delivery_target(session: Session, component_version_id: str, installation_id: str):
    """The component version, its definition and connection version in one query,
    with the checks of `load_action_component` (run before every delivery attempt).
    The proposal delivered was prepared with this version, so its retirement does not
    refuse it (FOUR-7: retiring stops new preparation only).

    Returns:
        (component version, connection version).

    Raises:
        ActionError: as `load_action_component`.
    """
    row = session.execute(
        select(ComponentVersion, ComponentDefinition, ConnectionVersion)
        .join(ComponentDefinition, ComponentDefinition.id == ComponentVersion.definition_id)
        .outerjoin(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .where(ComponentVersion.id == component_version_id)
    ).first()
    version, definition, connection = row if row else (None, None, None)
    _check_component(version, definition, installation_id, (component_version_id,))
    if connection is None:
        raise ActionError("action_component_operation_invalid")
    return version, connection


def load_connection(session: Session, connection_version_id: str) -> ConnectionVersion:
    connection = session.get(ConnectionVersion, connection_version_id)
    if connection is None:
        raise ActionError("action_component_operation_invalid")
    return connection


def destination_of(session: Session, component: ComponentVersion, connection: ConnectionVersion | None = None):
    """What is in force for a component version's delivery (FOUR-5): its kind and
    reference and its connection version's base URL, as a `Destination`.

    Args:
        component: the component version (checked by `load_action_component`).
        connection: its connection version when already loaded.
    """
    from app.domain.proposal.destination import Destination

    if connection is None and component.connection_version_id:
        connection = session.get(ConnectionVersion, component.connection_version_id)
    base_url = connection.base_url if connection else ""
    return Destination(component.implementation_kind, component.implementation_reference or "", base_url)


def delivery_in_force(session: Session, proposal) -> dict | None:
    """`describe` of a proposal's delivery as its component and connection are now
    (FOUR-5), or None when the component version is gone or cannot be sent as
    configured (its own error says why when delivery is tried)."""
    from app.domain.proposal.destination import delivery_fields, describe

    component = session.get(ComponentVersion, proposal.component_version_id)
    if component is None:
        return None
    current = describe(
        destination_of(session, component), delivery_fields(proposal.id, proposal.operation_id, proposal.target)
    )
    return None if "invalid" in current else current
