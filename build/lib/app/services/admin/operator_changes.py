"""Reactivating an account as a configuration change (SPEC FOUR-4): who may act is
four-eyes, so an operator deactivated by one admin comes back only when a second
admin approves. Deactivating stays single-admin (it only takes power away, see
`app.domain.config_changes.SINGLE_ADMIN_WRITES`)."""

from __future__ import annotations

from typing import Any

from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.models import OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, setting, submit
from app.services.admin.input import change_key, plausible_id
from app.services.uow import UnitOfWork, unit_of_work


def _operator(session, installation_id: str, operator_id: Any) -> OperatorUser:
    operator = session.get(OperatorUser, operator_id) if plausible_id(operator_id) else None
    if operator is None or operator.installation_id != installation_id:
        raise ApiError(404, "operator_not_found", "No such operator.")
    return operator


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    operator = _operator(session, installation_id, content["operator_id"])
    return {
        "account": f"{operator.display_name} <{operator.email}>",
        "roles": sorted(operator.roles),
        "active": operator.active,
    }


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _operator(uow.session, context.installation_id, content["operator_id"])
    if not operator.active:
        operator.active = True
        uow.audit(
            context.installation_id,
            change_key("operator-reactivated", operator.id),
            "admin.operator_reactivated",
            context.actor,
            "operator_user",
            operator.id,
            context.details({"email": operator.email, "session_version": operator.session_version}),
        )
    return {"operator_id": operator.id}


OPERATOR_REACTIVATE = ChangeType(
    kind=ChangeKind.OPERATOR_REACTIVATE,
    subject_type="operator_user",
    subject="operator_id",
    current=_current,
    summary=lambda content, current: f"Reactivate {(current or {}).get('account', 'an account')}",
    apply=_apply,
    display=setting("active", True),
)


def reactivate_operator(admin: OperatorUser, operator_id: str) -> PendingChange | None:
    """Propose reactivating an operator of the admin's installation (FOUR-4): they may
    sign in and act again once a second admin approves.

    Args:
        admin: the admin proposing it.
        operator_id: a deactivated operator of the installation.

    Returns:
        The `PendingChange` stored, or None when the operator is active already.

    Raises:
        ApiError: 404 ``operator_not_found`` (also another installation's).
    """
    with unit_of_work() as uow:
        operator = _operator(uow.session, admin.installation_id, operator_id)
        if operator.active:
            return None
        outcome = submit(uow, admin, OPERATOR_REACTIVATE, {"operator_id": operator.id})
        uow.commit()
    return outcome
