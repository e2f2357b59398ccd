"""Signing in through the identity provider (SPEC OPS-1): the verified claims of an ID
token become an operator with exactly the roles the installation's group mapping gives.

* A known identity (issuer, subject) gets its roles set to the mapped ones at every
  sign-in: a group removed at the provider takes its role away. With no role left the
  sign-in is refused and every session of the account ends (its session version moves).
* An unknown identity with at least one mapped role is created just in time, as an
  ``sso`` account (no usable password), audited.
* An email already held by another account is refused, never linked: the provider's
  ``email`` claim is whatever the provider's administrators typed, so linking by it would
  let anyone who controls an IdP account with that address take over a password account
  (and its roles, perhaps admin) without a second admin seeing it. See docs/sso.md.

Verifying the token (signature, issuer, audience, nonce, expiry) is Authlib's, in the
view (`app.web.auth.sso`); this module trusts the claims it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.domain.accounts import email_lookalike_problem
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.sso import groups_from_claims, roles_for_groups
from app.extensions import db
from app.models import Installation, OperatorUser, SsoGroupRole, SsoIdentity
from app.services.admin.input import has_control_characters
from app.services.admin.invitations import unusable_password_hash
from app.services.admin.operators import EMAIL_PATTERN
from app.services.uow import Actor, UnitOfWork, unit_of_work

SSO_ACTOR = Actor.system("sso")


def mapping_pairs(session, installation_id: str) -> list[dict[str, str]]:
    """The installation's group→role mapping, sorted by (group, role) (OPS-1)."""
    rows = session.execute(
        select(SsoGroupRole.group_name, SsoGroupRole.role).where(SsoGroupRole.installation_id == installation_id)
    ).all()
    # Sorted here, not by the database: its collation may order names otherwise than
    # `app.domain.sso.check_mapping`, and the two are compared.
    return [{"group": group, "role": role} for group, role in sorted(rows)]


def _no_role(groups) -> ApiError:
    named = ", ".join(sorted(groups)[:10]) or "none"
    return ApiError(
        403,
        "sso_no_role",
        f"None of your identity provider's groups ({named}) gives a role in this console, so you cannot sign in. "
        "Ask an admin which group you need.",
    )


def _installation(session, slug: str | None) -> Installation:
    """The installation new SSO operators join: ``OIDC_INSTALLATION`` (a slug), else the only one."""
    if slug:
        installation = session.scalar(select(Installation).where(Installation.slug == slug))
    else:
        installations = session.scalars(select(Installation).limit(2)).all()
        installation = installations[0] if len(installations) == 1 else None
    if installation is None:
        raise ApiError(
            503,
            "sso_installation_unknown",
            "Single sign-on cannot tell which installation you join: the console's OIDC_INSTALLATION setting "
            "names none. Tell the console's operator.",
        )
    return installation


def _audit_roles(uow: UnitOfWork, operator: OperatorUser, before: frozenset, after: frozenset, groups, issuer: str):
    uow.audit(
        operator.installation_id,
        f"operator-sso-roles:{operator.id}:{utcnow().isoformat()}",
        "operator.sso_roles_changed",
        SSO_ACTOR,
        "operator_user",
        operator.id,
        {"from": sorted(before), "to": sorted(after), "groups": sorted(groups)[:100], "issuer": issuer},
    )


def _known(uow: UnitOfWork, identity: SsoIdentity, groups: frozenset[str], issuer: str) -> OperatorUser:
    operator = uow.session.get(OperatorUser, identity.operator_id)
    if not operator.active:
        raise ApiError(403, "sso_account_disabled", "Your console account is disabled. Ask an admin.")
    roles = roles_for_groups(mapping_pairs(uow.session, operator.installation_id), groups)
    if roles != operator.roles:
        _audit_roles(uow, operator, operator.roles, roles, groups, issuer)
        operator.roles = roles
    if not roles:  # every session of the account ends, not only this sign-in
        operator.session_version += 1
        uow.commit()
        raise _no_role(groups)
    operator.last_login_at = identity.last_sign_in_at = utcnow()
    return operator


def _unverified(value: Any) -> bool:
    """Whether ``email_verified`` says no: the JSON boolean, or the strings some IdPs send."""
    return value is False or (isinstance(value, str) and value.strip().lower() in ("false", "0", "no"))


def _email(claims: Mapping[str, Any]) -> str:
    email = claims.get("email")
    if isinstance(email, str) and email_lookalike_problem(email):  # FOUR-10, as for invited accounts
        raise ApiError(403, "sso_email_not_ascii", email_lookalike_problem(email))
    email = email.strip().lower() if isinstance(email, str) else ""
    if not EMAIL_PATTERN.match(email) or has_control_characters(email) or _unverified(claims.get("email_verified")):
        raise ApiError(
            403,
            "sso_email_missing",
            "The identity provider sent no verified email address for you; the console needs one for a new account.",
        )
    return email


def _display_name(claims: Mapping[str, Any], email: str) -> str:
    name = claims.get("name")
    name = name.strip() if isinstance(name, str) else ""
    return name if 1 <= len(name) <= 200 and not has_control_characters(name) else email


def _create(
    uow: UnitOfWork, claims: Mapping[str, Any], groups: frozenset[str], issuer: str, installation_slug: str | None
) -> OperatorUser:
    installation = _installation(uow.session, installation_slug)
    roles = roles_for_groups(mapping_pairs(uow.session, installation.id), groups)
    if not roles:
        raise _no_role(groups)
    email = _email(claims)
    if uow.session.scalar(select(OperatorUser.id).where(func.lower(OperatorUser.email) == email)):
        raise ApiError(
            409,
            "sso_email_taken",
            # The address is not repeated: whoever holds an IdP account must not learn which emails have accounts here.
            "An account with this email exists already and signs in with its password. The console does not join it "
            "to your identity provider's account by email. Sign in with the password, or ask an admin.",
        )
    operator = OperatorUser(
        installation_id=installation.id,
        email=email,
        display_name=_display_name(claims, email),
        password_hash=unusable_password_hash(),
        sign_in_method="sso",
        last_login_at=utcnow(),
    )
    operator.roles = roles
    uow.session.add(operator)
    uow.session.flush()
    uow.session.add(
        SsoIdentity(
            installation_id=installation.id,
            operator_id=operator.id,
            issuer=issuer,
            subject=claims["sub"],
            last_sign_in_at=utcnow(),
        )
    )
    uow.session.flush()
    uow.audit(
        installation.id,
        f"operator-created:{operator.id}",
        "operator.created",
        SSO_ACTOR,
        "operator_user",
        operator.id,
        {
            "email": email,
            "roles": sorted(roles),
            "sign_in_method": "sso",
            "issuer": issuer,
            "subject": claims["sub"],
            "groups": sorted(groups)[:100],
        },
    )
    return operator


def sign_in(
    issuer: str, claims: Mapping[str, Any], *, groups_claim: str = "groups", installation_slug: str | None = None
) -> OperatorUser:
    """The operator the identity provider vouches for, with the mapped roles (OPS-1).

    Args:
        issuer: the issuer the ID token was verified against (``OIDC_ISSUER``).
        claims: the verified ID token claims: ``sub`` (required), the groups claim,
            and for a new account ``email`` (not ``email_verified: false``) and
            optionally ``name``.
        groups_claim: the claim holding the groups (``OIDC_GROUPS_CLAIM``).
        installation_slug: ``OIDC_INSTALLATION``: the installation new operators join
            (None: the only installation).

    Returns:
        The operator, roles updated, last sign-in set; committed.

    Raises:
        ApiError: 403 ``sso_groups_missing``, ``sso_no_role`` (for a known account, its
            roles are emptied and its sessions end: committed), ``sso_account_disabled``,
            ``sso_email_missing``, ``sso_email_not_ascii``, ``sso_subject_missing``; 409 ``sso_email_taken``,
            ``sso_sign_in_conflict``; 503 ``sso_installation_unknown``. Nothing else
            is written then.
    """
    subject = claims.get("sub")
    if not isinstance(subject, str) or not 1 <= len(subject) <= 255 or has_control_characters(subject):
        raise ApiError(403, "sso_subject_missing", "The identity provider's answer names no usable subject.")
    groups = groups_from_claims(claims, groups_claim)
    try:
        with unit_of_work() as uow:
            identity = uow.session.scalar(
                select(SsoIdentity).where(SsoIdentity.issuer == issuer, SsoIdentity.subject == subject)
            )
            if identity is not None:
                operator = _known(uow, identity, groups, issuer)
            else:
                operator = _create(uow, claims, groups, issuer, installation_slug)
            operator_id = operator.id
            uow.commit()
    except IntegrityError as error:  # the same new identity signing in twice at once
        raise ApiError(409, "sso_sign_in_conflict", "You were signed in twice at once. Try again.") from error
    return db.session.get(OperatorUser, operator_id)
