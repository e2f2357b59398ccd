"""Creating a connection as a configuration change (SPEC FOUR-4): a new connection is
a new destination for actions, with its secrets, so it is created only when a second
admin approves it. As for a connection version, new secrets wait in the change's
secrets (their digests in its content) and a generated signing secret is shown to
the proposer once; none is usable before approval."""

from __future__ import annotations

from typing import Any

from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.models import Connection, Integration, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.connection_settings import (
    ConnectionSettings,
    proposed_settings,
    settings_content,
    shown_once,
    version_row,
)
from app.services.admin.connections import add_connection_version
from app.services.admin.input import add_with_unique_slug, clean_name, clean_slug, plausible_id
from app.services.uow import UnitOfWork, unit_of_work


def _integration(session, installation_id: str, integration_id: str | None) -> Integration | None:
    if integration_id is None:
        return None
    integration = session.get(Integration, integration_id) if plausible_id(integration_id) else None
    if integration is None or integration.installation_id != installation_id:
        raise ApiError(400, "integration_invalid", "Choose one of this installation's integrations.", "integration_id")
    return integration


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any] | None:
    """Nothing is replaced; the integration is named for the change page (FOUR-10)."""
    integration = _integration(session, installation_id, content["integration_id"])
    return {"integration": f"{integration.name} ({integration.slug})"} if integration else {}


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    _integration(uow.session, installation_id, content["integration_id"])
    columns, details = version_row(content, secrets, None)
    connection = Connection(
        installation_id=installation_id,
        integration_id=content["integration_id"],
        name=content["name"],
        slug=content["slug"],
    )
    add_with_unique_slug(uow.session, connection, "A connection")
    version = add_connection_version(uow, connection, 1, columns)
    uow.audit(
        installation_id,
        f"admin:connection-created:{connection.id}",
        "admin.connection_created",
        context.actor,
        "connection",
        connection.id,
        context.details(
            {
                "name": content["name"],
                "slug": content["slug"],
                "integration_id": content["integration_id"],
                "version_id": version.id,
                **details,
            }
        ),
    )
    return {"connection_id": connection.id, "version_id": version.id, "version": 1}


def _display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The new connection as the change page shows it: its host and path, secrets named, never shown."""
    proposed: dict[str, Any] = {"name": content["name"], "slug": content["slug"]}
    proposed["integration"] = (current or {}).get("integration") or content["integration_id"]
    return {}, proposed | proposed_settings(content)


CONNECTION_CREATE = ChangeType(
    kind=ChangeKind.CONNECTION_CREATE,
    subject_type="connection",
    current=_current,
    summary=lambda content, current: f"New connection {content['name']!r} to {content['base_url']}",
    apply=_apply,
    display=_display,
)


def create_connection(
    operator: OperatorUser, *, name: str, slug: str, integration_id: str | None, settings: ConnectionSettings
) -> PendingChange:
    """Propose a connection and its version 1 in the operator's installation (FOUR-4).

    Args:
        operator: the admin doing it.
        name: 1..200 characters; slug: unique in the installation.
        integration_id: the integration (platform) it reaches, or None/"".
        settings: the version's settings (``keep`` is not possible for a first version).

    Returns:
        The `PendingChange`; a generated signing secret is in its ``shown_once``.
        Approving it returns ``{"connection_id", "version_id", "version"}``.

    Raises:
        ApiError: 400 ``name_invalid``, ``slug_invalid``, ``integration_invalid``,
            ``connection_url_invalid``, ``connection_timeout_invalid``,
            ``connection_allowed_hosts_invalid``, ``connection_bearer_token_invalid``,
            ``connection_signing_secret_invalid``; 409 ``slug_taken``.
    """
    name = clean_name(name)
    slug = clean_slug(slug)
    fields, secrets = settings_content(settings, None)
    content = {"name": name, "slug": slug, "integration_id": integration_id or None, **fields}
    with unit_of_work() as uow:
        outcome = submit(uow, operator, CONNECTION_CREATE, content, secrets, shown_once=shown_once(secrets))
        uow.commit()
    return outcome
