"""Operators: create them, sign them in and out, change their roles, deactivate them.

Every new account is a configuration change for a second admin and is created by
invitation (SPEC FOUR-6, `app.services.admin.invitations`); granting the reviewer or
admin role to an existing operator is one too (FOUR-2, `app.services.admin.changes`).
"""

from __future__ import annotations

import re
from typing import Any

from flask import current_app
from sqlalchemy import func, select, update
from werkzeug.security import check_password_hash, generate_password_hash

from app.domain.accounts import check_new_password, email_lookalike_problem
from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Installation, OperatorUser
from app.models.tenancy import ROLES
from app.services.admin import invitations
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import change_key, has_control_characters, plausible_id
from app.services.uow import Actor, UnitOfWork, unit_of_work

EMAIL_PATTERN = re.compile(r"^[^@\s]{1,200}@[^@\s]{1,100}\.[^@\s]{1,20}$")
# Checked against when the email is unknown, one per hash method, so that refusing an
# unknown email costs what refusing a known one does (SEC-6).
_DUMMY_HASHES: dict[str, str] = {}


def _dummy_hash() -> str:
    method = current_app.config.get("PASSWORD_HASH_METHOD", "scrypt")
    if method not in _DUMMY_HASHES:
        _DUMMY_HASHES[method] = generate_password_hash("not-a-password", method=method)
    return _DUMMY_HASHES[method]


def authenticate_operator(email: str, password: str) -> OperatorUser | None:
    """The active operator with this email and password, or None (SEC-6).

    Every attempt runs exactly one password-hash check — against the operator's
    hash, or a dummy hash of the same method for an unknown email — before the
    account's state is looked at, so refusing an unknown, a deactivated or an
    active account with a wrong password takes the same time. Callers show one
    message for every refusal.

    Args:
        email: as typed (case and surrounding spaces ignored).
        password: as typed.

    Returns:
        The operator, with ``last_login_at`` set, or None.
    """
    operator = db.session.scalar(
        select(OperatorUser).where(func.lower(OperatorUser.email) == (email or "").strip().lower())
    )
    if operator is None:
        check_password_hash(_dummy_hash(), password or "")
        return None
    if not operator.check_password(password or "") or not operator.active:
        return None
    if operator.sign_in_method != "password":  # OPS-1: an SSO account signs in only through its IdP
        return None
    with unit_of_work() as uow:
        row = uow.session.get(OperatorUser, operator.id)
        row.last_login_at = utcnow()
        uow.commit()
    return db.session.get(OperatorUser, operator.id)


def end_sessions(operator_id: str, session_version: int) -> bool:
    """End every session of an operator: the sign-out of one of them (SEC-1).

    Sessions carry the operator's session version, checked on every request; this
    bumps it, so the cookie of each of their sessions (this one too, even replayed
    later) no longer signs anyone in. Guarded on the version the session carried:
    a session that had already ended changes nothing.

    Args:
        operator_id: the signed-in operator.
        session_version: the version their session carried.

    Returns:
        Whether the version was bumped.
    """
    with unit_of_work() as uow:
        result = uow.session.execute(
            update(OperatorUser)
            .where(OperatorUser.id == operator_id, OperatorUser.session_version == session_version)
            .values(session_version=OperatorUser.session_version + 1)
        )
        uow.commit()
    return result.rowcount == 1


def validate_roles(roles) -> list[str]:
    roles = sorted(set(roles))
    if not roles or any(role not in ROLES for role in roles):
        raise ApiError(400, "roles_invalid", f"Roles must be among: {', '.join(ROLES)}.", "roles")
    return roles


def _clean_new_operator(email: Any, display_name: Any, roles) -> tuple[str, str, list[str]]:
    if isinstance(email, str) and email_lookalike_problem(email):  # FOUR-10
        raise ApiError(400, "operator_email_not_ascii", email_lookalike_problem(email), "email")
    email = email.strip().lower() if isinstance(email, str) else ""
    if not EMAIL_PATTERN.match(email) or has_control_characters(email):
        raise ApiError(400, "email_invalid", "Enter a valid email address.", "email")
    display_name = display_name.strip() if isinstance(display_name, str) else ""
    if not 1 <= len(display_name) <= 200 or has_control_characters(display_name):
        raise ApiError(400, "display_name_invalid", "Give a display name of 1 to 200 characters.", "display_name")
    return email, display_name, validate_roles(roles)


def _password_hash(password: str) -> str:
    holder = OperatorUser()  # never added to the session: only its hashing is used
    holder.set_password(password)
    return holder.password_hash


def _insert_operator(
    uow: UnitOfWork,
    context: ApplyContext,
    email: str,
    display_name: str,
    roles: list[str],
    password_hash: str,
    extra: dict[str, Any] | None = None,
) -> OperatorUser:
    installation_id = context.installation_id
    if uow.session.get(Installation, installation_id) is None:
        raise ApiError(404, "installation_not_found", "No such installation.")
    if uow.session.scalar(select(OperatorUser.id).where(func.lower(OperatorUser.email) == email)):
        raise ApiError(409, "email_taken", "An operator with this email exists.", "email")
    operator = OperatorUser(installation_id=installation_id, email=email, display_name=display_name)
    operator.roles = roles
    operator.password_hash = password_hash
    uow.session.add(operator)
    uow.session.flush()
    uow.audit(
        installation_id,
        f"operator-created:{operator.id}",
        "operator.created",
        context.actor,
        "operator_user",
        operator.id,
        context.details({"email": email, "roles": roles, **(extra or {})}),
    )
    return operator


def create_operator(
    installation_id: str,
    *,
    email: str,
    password: str,
    display_name: str,
    roles,
    actor: Actor,
    details: dict[str, Any] | None = None,
) -> OperatorUser:
    """Create an operator at once, as the system, with the password given: the CLI
    (``create-admin``, run by the person at the server's shell), the demo seed and
    test builders. Admins invite operators with `add_operator` (FOUR-6).

    Args:
        details: more for the ``operator.created`` audit row (the CLI's reason, OS
            user and host, FOUR-10).

    Raises:
        ApiError: 400 ``email_invalid``, ``operator_email_not_ascii``,
            ``password_invalid``, ``roles_invalid``, ``display_name_invalid``;
            409 ``email_taken``; 404 ``installation_not_found``.
    """
    email, display_name, roles = _clean_new_operator(email, display_name, roles)
    password_hash = _password_hash(check_new_password(password))
    with unit_of_work() as uow:
        operator = _insert_operator(
            uow, ApplyContext(installation_id, actor), email, display_name, roles, password_hash, details
        )
        operator_id = operator.id
        uow.commit()
    return db.session.get(OperatorUser, operator_id)


def _apply_create(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _insert_operator(
        uow, context, content["email"], content["display_name"], content["roles"], invitations.unusable_password_hash()
    )
    token = invitations.issue(uow, context, operator, "mail" if invitations.mail_configured() else "approver")
    return {"operator_id": operator.id, "shown_once": {"operator_id": operator.id, "invitation_token": token}}


OPERATOR_CREATE = ChangeType(
    kind=ChangeKind.OPERATOR_CREATE,
    subject_type="operator_user",
    summary=lambda content, current: f"New user {content['email']} ({', '.join(content['roles'])})",
    apply=_apply_create,
    deliver=invitations.deliver,
)


def add_operator(admin: OperatorUser, *, email: str, display_name: str, roles) -> PendingChange:
    """An admin proposes a new operator of their installation, by invitation (FOUR-6).

    No password is given: the change waits for a second admin (every account does);
    when approved, the account exists with no usable password and a one-time link
    (`app.services.admin.invitations`) with which the invitee sets their own, mailed
    to them or shown once to the approving admin, never to the proposer.

    Args:
        admin: the admin proposing it.
        email: unique, plain ASCII (FOUR-10); display_name: 1..200 characters.
        roles: role names among moderator, reviewer, admin, auditor.

    Returns:
        The `PendingChange` stored.

    Raises:
        ApiError: 400 ``email_invalid``, ``operator_email_not_ascii``,
            ``roles_invalid``, ``display_name_invalid``; 409 ``email_taken``.
    """
    email, display_name, roles = _clean_new_operator(email, display_name, roles)
    content = {"email": email, "display_name": display_name, "roles": roles}
    with unit_of_work() as uow:
        outcome = submit(uow, admin, OPERATOR_CREATE, content)
        if not isinstance(outcome, PendingChange):  # second_admin_reasons always holds it (FOUR-6)
            raise RuntimeError("operator.create would apply without a second admin")
        uow.commit()
    return outcome


# --- the admin screens -------------------------------------------------------------


def list_operators(installation_id: str) -> list[OperatorUser]:
    """The installation's operators: active ones first, then by email."""
    return list(
        db.session.scalars(
            select(OperatorUser)
            .where(OperatorUser.installation_id == installation_id)
            .order_by(OperatorUser.active.desc(), OperatorUser.email)
        )
    )


def operator_detail(installation_id: str, operator_id: str) -> OperatorUser:
    """One operator of the installation.

    Raises:
        ApiError: 404 ``operator_not_found`` (also for another installation's).
    """
    operator = db.session.get(OperatorUser, operator_id) if plausible_id(operator_id) else None
    if operator is None or operator.installation_id != installation_id:
        raise ApiError(404, "operator_not_found", "No such operator.")
    return operator


def _operator_for_change(session, installation_id: str, operator_id: Any) -> OperatorUser:
    operator = session.get(OperatorUser, operator_id) if plausible_id(operator_id) else None
    if operator is None or operator.installation_id != installation_id:
        raise ApiError(404, "operator_not_found", "No such operator.")
    return operator


def _current_roles(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    operator = _operator_for_change(session, installation_id, content["operator_id"])
    return {"operator": f"{operator.display_name} <{operator.email}>", "roles": sorted(operator.roles)}


def _apply_roles(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _operator_for_change(uow.session, context.installation_id, content["operator_id"])
    before, roles = sorted(operator.roles), content["roles"]
    if before != roles:
        operator.roles = roles
        operator.session_version += 1
        uow.audit(
            context.installation_id,
            f"admin:operator-roles:{operator.id}:{operator.session_version}",
            "admin.operator_roles_changed",
            context.actor,
            "operator_user",
            operator.id,
            context.details({"before": before, "after": roles, "session_version": operator.session_version}),
        )
    return {"operator_id": operator.id}


OPERATOR_ROLES = ChangeType(
    kind=ChangeKind.OPERATOR_ROLES,
    subject_type="operator_user",
    subject="operator_id",
    current=_current_roles,
    summary=lambda content, current: f"Roles of {current['operator']}: {', '.join(content['roles'])}",
    apply=_apply_roles,
)


def change_operator_roles(admin: OperatorUser, operator_id: str, roles) -> OperatorUser | PendingChange:
    """Give an operator of the admin's installation a new set of roles.

    A change bumps the operator's session version, so their open sessions end and
    the new roles apply from their next sign-in. The same roles again change nothing.
    Granting the reviewer or admin role is a change for a second admin (FOUR-2): it
    is stored pending and the roles stay as they are until another admin approves.

    Args:
        admin: the admin doing it.
        roles: an iterable of role names among moderator, reviewer, admin, auditor.

    Returns:
        The operator as saved, or the `PendingChange` stored.

    Raises:
        ApiError: 400 ``roles_invalid``; 404 ``operator_not_found``;
            409 ``own_admin_role_required`` when an admin drops their own admin role.
    """
    admin_id = admin.id
    roles = validate_roles(roles if isinstance(roles, list | tuple | set | frozenset) else [])
    if operator_id == admin_id and "admin" not in roles:
        raise ApiError(
            409,
            "own_admin_role_required",
            "You cannot remove your own admin role. Ask another admin to do it.",
            "roles",
        )
    with unit_of_work() as uow:
        outcome = submit(uow, admin, OPERATOR_ROLES, {"operator_id": operator_id, "roles": roles})
        uow.commit()
    if isinstance(outcome, PendingChange):
        return outcome
    return db.session.get(OperatorUser, outcome["operator_id"])


def set_operator_active(admin: OperatorUser, operator_id: str, active: bool) -> OperatorUser | PendingChange:
    """Deactivate an operator of the admin's installation, or propose reactivating one.

    Deactivating bumps the session version: the operator's open sessions end at
    their next request and they cannot sign in. Reactivating is a change for a
    second admin (FOUR-4, `app.services.admin.operator_changes`). Setting the state
    an operator already has changes nothing.

    Returns:
        The operator, or the `PendingChange` stored for a reactivation.

    Raises:
        ApiError: 404 ``operator_not_found``; 409 ``cannot_deactivate_self``.
    """
    if active:
        from app.services.admin.operator_changes import reactivate_operator

        return reactivate_operator(admin, operator_id) or operator_detail(admin.installation_id, operator_id)
    installation_id = admin.installation_id
    admin_id = admin.id
    if operator_id == admin_id and not active:
        raise ApiError(409, "cannot_deactivate_self", "You cannot deactivate your own account.")
    with unit_of_work() as uow:
        operator = _operator_for_change(uow.session, installation_id, operator_id)
        if operator.active != bool(active):
            operator.active = bool(active)
            if not active:
                operator.session_version += 1
            verb = "reactivated" if active else "deactivated"
            uow.audit(
                installation_id,
                change_key(f"operator-{verb}", operator.id),
                f"admin.operator_{verb}",
                Actor("operator", admin_id),
                "operator_user",
                operator.id,
                {"email": operator.email, "session_version": operator.session_version},
            )
        uow.commit()
    return db.session.get(OperatorUser, operator_id)
