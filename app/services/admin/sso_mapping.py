"""The installation's group→role mapping for single sign-on (SPEC OPS-1): read it for
the admin page, and let an admin propose a new one, applied when a second admin
approves it by its digest (FOUR-2). The mapping decides who may sign in and with what
power, so every change of it waits for a second admin, removals included.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind, ChangeState
from app.domain.errors import ApiError
from app.domain.sso import check_mapping, parse_mapping_text
from app.extensions import db
from app.models import ConfigChange, OperatorUser, SsoGroupRole
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.sso_sign_in import mapping_pairs
from app.services.uow import UnitOfWork, unit_of_work


def current_mapping(installation_id: str) -> list[dict[str, str]]:
    """The mapping in force: ``[{"group", "role"}]`` sorted by (group, role) (OPS-1)."""
    return mapping_pairs(db.session, installation_id)


def pending_mapping_changes(installation_id: str) -> list[ConfigChange]:
    """The mapping changes waiting for a second admin, oldest first."""
    return list(
        db.session.scalars(
            select(ConfigChange)
            .where(
                ConfigChange.installation_id == installation_id,
                ConfigChange.kind == ChangeKind.SSO_MAPPING.value,
                ConfigChange.state == ChangeState.PENDING.value,
            )
            .order_by(ConfigChange.created_at)
        )
    )


def _current(session, installation_id: str, _content: dict[str, Any]) -> dict[str, Any]:
    return {"mapping": mapping_pairs(session, installation_id)}


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    pairs = check_mapping(content["mapping"])
    installation_id = context.installation_id
    previous = mapping_pairs(uow.session, installation_id)
    uow.session.execute(delete(SsoGroupRole).where(SsoGroupRole.installation_id == installation_id))
    uow.session.add_all(
        SsoGroupRole(installation_id=installation_id, group_name=pair["group"], role=pair["role"]) for pair in pairs
    )
    uow.session.flush()
    uow.audit(
        installation_id,
        f"sso-mapping-set:{installation_id}:{utcnow().isoformat()}",
        "sso.mapping_set",
        context.actor,
        "installation",
        installation_id,
        context.details({"mapping": pairs, "previous": previous}),
    )
    return {"pairs": len(pairs)}


def _summary(content: dict[str, Any], current: dict[str, Any] | None) -> str:
    before, after = len((current or {}).get("mapping") or ()), len(content["mapping"])
    return f"Single sign-on group mapping: {before} → {after} group = role pair{'s' if after != 1 else ''}"


SSO_MAPPING = ChangeType(
    kind=ChangeKind.SSO_MAPPING,
    subject_type="sso_mapping",
    current=_current,
    summary=_summary,
    apply=_apply,
)


def propose_mapping(operator: OperatorUser, text: Any) -> PendingChange | None:
    """Propose the installation's whole group→role mapping (OPS-1), stored for a
    second admin (FOUR-2).

    Args:
        operator: an admin of the installation.
        text: one ``group = role`` per line (`app.domain.sso.parse_mapping_text`);
            empty: no group gives a role.

    Returns:
        The `PendingChange` stored, or None when the mapping is that already.

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 400 ``sso_mapping_invalid``,
            ``sso_mapping_role_invalid``. Nothing is stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose the single sign-on mapping.")
    pairs = parse_mapping_text(text)
    with unit_of_work() as uow:
        if mapping_pairs(uow.session, operator.installation_id) == pairs:
            return None
        outcome = submit(uow, operator, SSO_MAPPING, {"mapping": pairs})
        uow.commit()
    return outcome
