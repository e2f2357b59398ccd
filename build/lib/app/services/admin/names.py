"""Ids named for people (SPEC FOUR-10): a change's page shows connections by their
host and path, component versions by name, version and destination, never bare ids."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session

from app.models import ComponentDefinition, ComponentVersion, Connection, ConnectionVersion
from app.services.admin.input import plausible_id


def connection_version_label(session: Session, version_id: Any) -> str | None:
    """``Demo platform API v2 (https://api.example.com/v1)``, or None for an unknown id."""
    version = session.get(ConnectionVersion, version_id) if plausible_id(version_id) else None
    if version is None:
        return None
    connection = session.get(Connection, version.connection_id)
    return f"{connection.name} v{version.version} ({version.base_url})"


def destination(session: Session, kind: str, reference: Any, connection_version_id: Any) -> str:
    """Where a component sends its actions, in words: method and full URL for a webhook
    (``POST https://api.example.com/v1/actions/takedown``), the request of a REST kind,
    the operation of an AT Protocol PDS, with the connection's base URL."""
    version = session.get(ConnectionVersion, connection_version_id) if plausible_id(connection_version_id) else None
    base = version.base_url.rstrip("/") if version else "(no connection)"
    reference = reference if isinstance(reference, str) else ""
    if kind == "rest":
        try:
            request = json.loads(reference).get("request", "")
        except (ValueError, AttributeError):
            request = ""
        reference = request if isinstance(request, str) else ""
    method, _, path = reference.strip().partition(" ")
    if path.startswith("/"):
        return f"{method} {base}{path}"
    return f"{reference.strip()} at {base}"


def component_version_label(session: Session, version_id: Any) -> str | None:
    """``Take down content v1: POST https://…/actions/takedown``, or None for an unknown id."""
    version = session.get(ComponentVersion, version_id) if plausible_id(version_id) else None
    if version is None:
        return None
    definition = session.get(ComponentDefinition, version.definition_id)
    where = destination(
        session, version.implementation_kind, version.implementation_reference, version.connection_version_id
    )
    return f"{definition.name} v{version.version}: {where}"


def name_component_side(session: Session, side: dict[str, Any]) -> dict[str, Any]:
    """A component change's side with its connection version named and its destination
    spelled out (the id itself is left out)."""
    if "connection_version_id" not in side:
        return side
    named = {key: value for key, value in side.items() if key != "connection_version_id"}
    version_id = side["connection_version_id"]
    named["connection"] = connection_version_label(session, version_id) or version_id
    named["destination"] = destination(
        session, side.get("implementation_kind", ""), side.get("implementation_reference"), version_id
    )
    return named


def name_workflow_side(session: Session, side: dict[str, Any]) -> dict[str, Any]:
    """A workflow change's side with the component versions its graph names listed by
    name, version and destination."""
    graph = side.get("graph")
    if not isinstance(graph, dict):
        return side
    ids = sorted(set(_component_ids(graph)))
    return {**side, "components_used": [component_version_label(session, i) or i for i in ids]}


def _component_ids(value: Any):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "component_version_id" and isinstance(item, str):
                yield item
            else:
                yield from _component_ids(item)
    elif isinstance(value, list):
        for item in value:
            yield from _component_ids(item)
