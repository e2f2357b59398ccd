"""Operators: create them, sign them in, change their roles."""

from __future__ import annotations

import re

from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Installation, OperatorUser
from app.models.tenancy import ROLES

from .uow import Actor, unit_of_work

EMAIL_PATTERN = re.compile(r"^[^@\s]{1,200}@[^@\s]{1,100}\.[^@\s]{1,20}$")
# Checked against when the email is unknown, so timing does not tell which emails exist.
_DUMMY_HASH = None


def _dummy_hash() -> str:
    global _DUMMY_HASH
    if _DUMMY_HASH is None:
        from werkzeug.security import generate_password_hash

        _DUMMY_HASH = generate_password_hash("not-a-password")
    return _DUMMY_HASH


def authenticate_operator(email: str, password: str) -> OperatorUser | None:
    """The active operator with this email and password, or None."""
    from werkzeug.security import check_password_hash

    operator = db.session.scalar(
        select(OperatorUser).where(func.lower(OperatorUser.email) == (email or "").strip().lower())
    )
    if operator is None:
        check_password_hash(_dummy_hash(), password or "")
        return None
    if not operator.active or not operator.check_password(password or ""):
        return None
    with unit_of_work() as uow:
        row = uow.session.get(OperatorUser, operator.id)
        row.last_login_at = utcnow()
        uow.commit()
    return db.session.get(OperatorUser, operator.id)


def validate_roles(roles) -> list[str]:
    roles = sorted(set(roles))
    if not roles or any(role not in ROLES for role in roles):
        raise ApiError(400, "roles_invalid", f"Roles must be among: {', '.join(ROLES)}.", "roles")
    return roles


def create_operator(
    installation_id: str, *, email: str, password: str, display_name: str, roles, actor: Actor
) -> OperatorUser:
    """Create an operator.

    Raises:
        ApiError: 400 ``email_invalid``, ``password_invalid``, ``roles_invalid``,
            ``display_name_invalid``; 409 ``email_taken``; 404 ``installation_not_found``.
    """
    email = (email or "").strip().lower()
    if not EMAIL_PATTERN.match(email):
        raise ApiError(400, "email_invalid", "Enter a valid email address.", "email")
    if not isinstance(password, str) or not 12 <= len(password) <= 500:
        raise ApiError(400, "password_invalid", "Passwords need 12 to 500 characters.", "password")
    display_name = (display_name or "").strip()
    if not 1 <= len(display_name) <= 200:
        raise ApiError(400, "display_name_invalid", "Give a display name of 1 to 200 characters.", "display_name")
    roles = validate_roles(roles)
    with unit_of_work() as uow:
        if uow.session.get(Installation, installation_id) is None:
            raise ApiError(404, "installation_not_found", "No such installation.")
        if uow.session.scalar(select(OperatorUser.id).where(func.lower(OperatorUser.email) == email)):
            raise ApiError(409, "email_taken", "An operator with this email exists.", "email")
        operator = OperatorUser(installation_id=installation_id, email=email, display_name=display_name)
        operator.roles = roles
        operator.set_password(password)
        uow.session.add(operator)
        uow.session.flush()
        uow.audit(
            installation_id,
            f"operator-created:{operator.id}",
            "operator.created",
            actor,
            "operator_user",
            operator.id,
            {"email": email, "roles": roles},
        )
        operator_id = operator.id
        uow.commit()
    return db.session.get(OperatorUser, operator_id)
