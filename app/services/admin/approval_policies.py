"""The installation's approval policies and routes as a four-eyes change (SPEC POL-1,
POL-3, FOUR-4): read them for the admin page, and let an admin propose a new settings
document, applied when a second admin approves it by its digest as a new
`ApprovalSettingsVersion` (the newest is in force, `approval_routing.current_settings`).

Who must approve an action is what four-eyes protects, so every change of these
settings waits for a second admin. Open proposals keep the policies recorded when
they were prepared (POL-3); a new version applies to proposals prepared after it.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from flask import current_app
from sqlalchemy import select

from app.domain.approval_policy import settings_to_json
from app.domain.approval_settings import change_words, document_problems, normalised
from app.domain.config_changes import ChangeKind, ChangeState
from app.domain.errors import ApiError
from app.egress import forbidden_address
from app.extensions import db
from app.models import ApprovalSettingsVersion, ComponentDefinition, ConfigChange, OperatorUser, WorkflowVersion
from app.models.changes import add_settings_version
from app.models.tenancy import ROLES
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.connection_settings import clean_base_url
from app.services.admin.input import InvalidInput, change_key, parse_json_text
from app.services.approval_routing import current_settings
from app.services.uow import UnitOfWork, unit_of_work

MAX_DOCUMENT_CHARS = 100_000
CODE = "approval_settings_invalid"


def settings_in_force(installation_id: str) -> tuple[dict[str, Any], int]:
    """(the settings document in force, its version; 0 for the built-in defaults) (POL-3)."""
    version = db.session.scalar(
        select(ApprovalSettingsVersion.version)
        .where(ApprovalSettingsVersion.installation_id == installation_id)
        .order_by(ApprovalSettingsVersion.version.desc())
        .limit(1)
    )
    return settings_to_json(current_settings(db.session, installation_id)), version or 0


def pending_settings_changes(installation_id: str) -> list[ConfigChange]:
    """The settings changes waiting for a second admin, oldest first."""
    return list(
        db.session.scalars(
            select(ConfigChange)
            .where(
                ConfigChange.installation_id == installation_id,
                ConfigChange.kind == ChangeKind.APPROVAL_SETTINGS.value,
                ConfigChange.state == ChangeState.PENDING.value,
            )
            .order_by(ConfigChange.created_at)
        )
    )


def webhook_problem(url: Any, allow_private: bool) -> str | None:
    """Why the approvers' notify webhook cannot be `url` (POL-7), or None: an http(s)
    URL with a host and no credentials, query or fragment, as a connection's base URL;
    a literal address egress refuses (private, loopback, special-purpose) is refused
    here too unless ``EGRESS_ALLOW_PRIVATE``. Host names are vetted again when sent."""
    if url is None:
        return None
    try:
        _, host = clean_base_url(url)
    except ApiError:
        return "The notify webhook URL must be an http:// or https:// URL with a host, and no credentials, query or fragment."
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    if not allow_private and forbidden_address(host):
        return "The notify webhook URL points at a private or special-purpose address, which egress refuses."
    return None


def known_actions(installation_id: str) -> tuple[list[str], list[str]]:
    """(the installation's component names, the action codes it knows) that a route may
    name (POL-3): every component definition's name, and as action codes every
    component's slug and every ``action_code`` its workflow versions' graphs name."""
    definitions = db.session.execute(
        select(ComponentDefinition.name, ComponentDefinition.slug).where(
            ComponentDefinition.installation_id == installation_id
        )
    ).all()
    codes = {slug for _, slug in definitions}
    for graph in db.session.scalars(select(WorkflowVersion.graph).where(WorkflowVersion.installation_id == installation_id)):
        codes |= set(_action_codes(graph))
    return sorted({name for name, _ in definitions}), sorted(codes)


def _action_codes(value: Any):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "action_code" and isinstance(item, str):
                yield item
            else:
                yield from _action_codes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _action_codes(item)


def checked_document(data: Any, installation_id: str | None = None) -> dict[str, Any]:
    """A settings document checked and normalised (POL-1, POL-3); with
    `installation_id`, a route's component and action code must be ones it knows.

    Raises:
        InvalidInput: 400 ``approval_settings_invalid`` listing every problem.
    """
    components, action_codes = known_actions(installation_id) if installation_id else (None, None)
    problems = document_problems(data, ROLES, components, action_codes)
    url = data.get("notify_webhook_url") if isinstance(data, dict) else None
    webhook = webhook_problem(url or None, current_app.config["EGRESS_ALLOW_PRIVATE"]) if isinstance(url, (str, type(None))) else None
    problems += [webhook] if webhook else []
    if problems:
        raise InvalidInput(400, CODE, "The approval settings cannot be used as written.", "settings", problems)
    return normalised(data)


def _current(session, installation_id: str, _content: dict[str, Any]) -> dict[str, Any]:
    return {"settings": settings_to_json(current_settings(session, installation_id))}


def _display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The change's page compares the settings in words (policies, routes in order)."""
    now = change_words(current["settings"]) if current and current.get("settings") else {}
    return now, change_words(content["settings"])


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    document = checked_document(content["settings"])  # checked by name when proposed: a component may go later
    installation_id = context.installation_id
    row = add_settings_version(uow.session, ApprovalSettingsVersion, installation_id, document, context.change_id)
    uow.audit(
        installation_id,
        change_key("approval-settings-set", row.id),
        "approval.settings_set",
        context.actor,
        "installation",
        installation_id,
        context.details({"version": row.version, "settings_digest": row.settings_digest}),
    )
    return {"settings_version_id": row.id, "version": row.version}


def _summary(content: dict[str, Any], _current: dict[str, Any] | None) -> str:
    settings = content["settings"]
    policies, routes = len(settings["policies"]), len(settings["routes"])
    return (
        f"Approval settings: {policies} polic{'y' if policies == 1 else 'ies'},"
        f" {routes} route{'' if routes == 1 else 's'}"
    )


APPROVAL_SETTINGS = ChangeType(
    kind=ChangeKind.APPROVAL_SETTINGS,
    subject_type="approval_settings",
    current=_current,
    summary=_summary,
    apply=_apply,
    display=_display,
)


def parse_document(text: Any) -> Any:
    """Settings typed as JSON text (at most 100,000 characters), parsed.

    Raises:
        ApiError: 400 ``approval_settings_invalid``.
    """
    value, _ = parse_json_text(
        text, code=CODE, field="settings", label="The approval settings", max_chars=MAX_DOCUMENT_CHARS
    )
    return value


def propose_settings(operator: OperatorUser, document: Any) -> PendingChange | None:
    """Propose the installation's whole approval settings (POL-1, POL-3), stored for a
    second admin (FOUR-2) with a digest that binds the document.

    Args:
        operator: an admin of the installation.
        document: the settings document (`approval_policy.settings_to_json`'s shape),
            parsed; see `app.domain.approval_settings.SETTINGS_SCHEMA`.

    Returns:
        The `PendingChange` stored, or None when the settings are those already.

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 400 ``approval_settings_invalid``
            (an `InvalidInput` listing the problems). Nothing is stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose approval settings.")
    document = checked_document(document, operator.installation_id)
    with unit_of_work() as uow:
        if settings_to_json(current_settings(uow.session, operator.installation_id)) == document:
            return None
        outcome = submit(uow, operator, APPROVAL_SETTINGS, {"settings": document})
        uow.commit()
    return outcome
