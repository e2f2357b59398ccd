"""Action components and their connections, as delivery needs them (PREP-3, DLV-2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.errors import ActionError
from app.domain.platform_kinds import PLATFORM_KINDS
from app.models import ComponentDefinition, ComponentVersion, ConnectionVersion

# DLV-2, SEC-3: "[POST|PUT|PATCH|DELETE] /path"; the method defaults to POST. The path
# keeps to URL path characters, never climbs out of the connection's base path ("..")
# and has no empty segment ("//", which reads as the start of another host).
OPERATION_PATTERN = re.compile(
    r"^(?:(POST|PUT|PATCH|DELETE)\s+)?(?!\S*(?://|/\.\.(?:/|$)|%2[eE]))(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)$"
)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str


def load_action_component(session: Session, component_version_id: str, installation_id: str) -> ComponentVersion:
    """The component version an action uses, if it can act for this installation.

    Raises:
        ActionError: ``action_component_unavailable`` when it does not exist, belongs
            to another installation, is retired, its definition is not active or
            not side-effecting;
            ``action_component_implementation_invalid`` when it is not a webhook,
            external_api, atproto_pds or rest component with a connection (PREP-3, PLAT-1, PLAT-3).
    """
    version = session.get(ComponentVersion, component_version_id)
    definition = session.get(ComponentDefinition, version.definition_id) if version else None
    _check_component(version, definition, installation_id)
    return version


def _check_component(version, definition, installation_id: str) -> None:
    if (
        version is None
        or definition is None
        or version.installation_id != installation_id
        or version.retired_at is not None
        or definition.status != "active"
        or definition.effect_class != "side_effecting"
    ):
        raise ActionError("action_component_unavailable")
    kinds = ("webhook", "external_api", *PLATFORM_KINDS)
    if version.implementation_kind not in kinds or not version.connection_version_id:
        raise ActionError("action_component_implementation_invalid")


def parse_operation(reference: str) -> Operation:
    """Parse an implementation reference such as ``POST /actions/takedown``: a method
    and a path under the connection's base URL.

    Raises:
        ActionError: ``action_component_operation_invalid`` (DLV-2, SEC-3).
    """
    match = OPERATION_PATTERN.match((reference or "").strip())
    if not match:
        raise ActionError("action_component_operation_invalid")
    return Operation(method=match.group(1) or "POST", path=match.group(2))


def load_delivery_target(session: Session, component_version_id: str, installation_id: str):
    """The component version, its definition and connection version in one query,
    with the checks of `load_action_component` (run before every delivery attempt).

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
    _check_component(version, definition, installation_id)
    if connection is None:
        raise ActionError("action_component_operation_invalid")
    return version, connection


def load_connection(session: Session, connection_version_id: str) -> ConnectionVersion:
    connection = session.get(ConnectionVersion, connection_version_id)
    if connection is None:
        raise ActionError("action_component_operation_invalid")
    return connection
