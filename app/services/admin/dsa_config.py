"""The installation's DSA settings as a four-eyes change (SPEC §7 DSA-1, FOUR-4): read
them for the admin page, and let an admin propose a new settings document, applied
when a second admin approves it by its digest as a new `DsaSettingsVersion` (the
newest is in force, `app.services.dsa.settings.current_settings`).

What a statement of reasons says, what a notice tells the affected user and where
statements go are decided by these settings, so no admin changes them alone.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.domain.config_changes import ChangeKind, ChangeState
from app.domain.dsa_settings import settings_from_json, settings_problems, settings_to_json
from app.domain.dsa_words import change_words, restriction_words
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ComponentDefinition, ConfigChange, Connection, DsaSettingsVersion, OperatorUser
from app.models.changes import add_settings_version
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import InvalidInput, change_key, parse_json_text
from app.services.dsa.settings import current_settings
from app.services.uow import UnitOfWork, unit_of_work

MAX_DOCUMENT_CHARS = 100_000
CODE = "dsa_settings_invalid"


def settings_in_force(installation_id: str) -> tuple[dict[str, Any], int]:
    """(the DSA settings document in force, its version; 0 for the built-in default:
    DSA off) (DSA-1)."""
    version = db.session.scalar(
        select(DsaSettingsVersion.version)
        .where(DsaSettingsVersion.installation_id == installation_id)
        .order_by(DsaSettingsVersion.version.desc())
        .limit(1)
    )
    return settings_to_json(current_settings(db.session, installation_id)), version or 0


def pending_settings_changes(installation_id: str) -> list[ConfigChange]:
    """The DSA settings changes waiting for a second admin, oldest first (DSA-1)."""
    return list(
        db.session.scalars(
            select(ConfigChange)
            .where(
                ConfigChange.installation_id == installation_id,
                ConfigChange.kind == ChangeKind.DSA_SETTINGS.value,
                ConfigChange.state == ChangeState.PENDING.value,
            )
            .order_by(ConfigChange.created_at)
        )
    )


def connection_names(installation_id: str) -> dict[str, str]:
    """Connection slug -> name, for the installation's connections (DSA-1: the
    Transparency Database connection is named by slug)."""
    rows = db.session.execute(
        select(Connection.slug, Connection.name).where(Connection.installation_id == installation_id)
    ).all()
    return {slug: name for slug, name in rows}


def component_slugs(installation_id: str) -> list[str]:
    """The slugs of the installation's components, which the settings may name."""
    query = select(ComponentDefinition.slug).where(ComponentDefinition.installation_id == installation_id)
    return sorted(db.session.scalars(query))


def checked_document(data: Any, installation_id: str | None = None) -> dict[str, Any]:
    """A DSA settings document checked and normalised (DSA-1); with `installation_id`,
    every component and connection slug it names must be the installation's.

    Returns:
        The document as `settings_to_json` writes it (what is stored and digested).

    Raises:
        InvalidInput: 400 ``dsa_settings_invalid`` listing every problem in words.
    """
    components = component_slugs(installation_id) if installation_id else None
    connections = list(connection_names(installation_id)) if installation_id else None
    problems = settings_problems(data, components=components, connections=connections)
    if problems:
        raise InvalidInput(400, CODE, "The DSA settings cannot be used as written.", "settings", problems)
    return settings_to_json(settings_from_json(data))


def _current(session, installation_id: str, _content: dict[str, Any]) -> dict[str, Any]:
    return {"settings": settings_to_json(current_settings(session, installation_id))}


def _display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The change's page compares the settings in words (labels, not API codes)."""
    now = change_words(current["settings"]) if current and current.get("settings") else {}
    return now, change_words(content["settings"])


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    document = checked_document(content["settings"])  # slugs were checked when proposed: a component may go later
    installation_id = context.installation_id
    row = add_settings_version(uow.session, DsaSettingsVersion, installation_id, document, context.change_id)
    uow.audit(
        installation_id,
        change_key("dsa-settings-set", row.id),
        "dsa.settings_set",
        context.actor,
        "installation",
        installation_id,
        context.details({"version": row.version, "settings_digest": row.settings_digest}),
    )
    return {"settings_version_id": row.id, "version": row.version}


def _summary(content: dict[str, Any], _current: dict[str, Any] | None) -> str:
    settings = content["settings"]
    if not settings.get("enabled"):
        return "DSA settings: off"
    restrictions, decisions = len(settings.get("restrictions") or {}), len(settings.get("decisions") or {})
    return (
        f"DSA settings: on, {restrictions} restricting component{'' if restrictions == 1 else 's'},"
        f" {decisions} decision code{'' if decisions == 1 else 's'}"
    )


DSA_SETTINGS = ChangeType(
    kind=ChangeKind.DSA_SETTINGS,
    subject_type="dsa_settings",
    current=_current,
    summary=_summary,
    apply=_apply,
    display=_display,
)


def parse_document(text: Any) -> Any:
    """DSA settings typed as JSON text (at most 100,000 characters), parsed (DSA-1).

    Raises:
        ApiError: 400 ``dsa_settings_invalid``.
    """
    value, _ = parse_json_text(
        text, code=CODE, field="settings", label="The DSA settings", max_chars=MAX_DOCUMENT_CHARS
    )
    return value


def propose_settings(operator: OperatorUser, document: Any) -> PendingChange | None:
    """Propose the installation's whole DSA settings (DSA-1), stored for a second admin
    (FOUR-2) with a digest that binds the document.

    Args:
        operator: an admin of the installation.
        document: the settings document, parsed; see
            `app.domain.dsa_settings.SETTINGS_SCHEMA`.

    Returns:
        The `PendingChange` stored, or None when the settings are those already.

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 400 ``dsa_settings_invalid`` (an
            `InvalidInput` listing every problem). Nothing is stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose DSA settings.")
    document = checked_document(document, operator.installation_id)
    with unit_of_work() as uow:
        if settings_to_json(current_settings(uow.session, operator.installation_id)) == document:
            return None
        outcome = submit(uow, operator, DSA_SETTINGS, {"settings": document})
        uow.commit()
    return outcome


def component_restriction(installation_id: str, slug: str) -> str:
    """Which DSA restriction a component's action is, in words, under the settings in
    force (DSA-1): e.g. "Removal of content (restriction of the visibility of
    content)", or "Not a restriction under the DSA" (DSA off, or not declared)."""
    return restriction_words(current_settings(db.session, installation_id).restriction_of(slug))
