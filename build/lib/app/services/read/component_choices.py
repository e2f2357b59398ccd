"""Choices of components for the console's forms."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import ComponentDefinition, ComponentVersion


def action_components(installation_id: str) -> list[tuple[str, str]]:
    """(component version id, label) of the versions that can act, for forms."""
    rows = db.session.execute(
        select(ComponentVersion.id, ComponentDefinition.name, ComponentVersion.version)
        .join(ComponentDefinition, ComponentDefinition.id == ComponentVersion.definition_id)
        .where(
            ComponentVersion.installation_id == installation_id,
            ComponentVersion.retired_at.is_(None),
            ComponentDefinition.status == "active",
        )
        .order_by(ComponentDefinition.name, ComponentVersion.version.desc())
    ).all()
    return [(id, f"{name} v{version}") for id, name, version in rows]
