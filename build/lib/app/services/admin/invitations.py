"""Accounts by invitation (SPEC FOUR-6): the one-time link with which a new operator
sets their own password, how it reaches them, and re-sending it.

Who receives the link: the invitee, by mail, when mail is configured: an SMTP server
(``MAIL_SERVER``, ``MAIL_PORT``, ``MAIL_SENDER``) AND ``PUBLIC_URL``, the only base of a
mailed link (never the request's Host or X-Forwarded-Host, which whoever sends the
request chooses: a re-send is single-admin, so such a link would hand the invitee's
token to a host of one admin's choosing). Otherwise the link is shown once to the admin
who approved the account (a second admin), never to its proposer, and is never stored:
only its SHA-256 is. Re-sending (a new link, the old one dead) is single-admin with
mail, since the link goes to the invitee only; without mail it is an ``operator.invite``
change for a second admin, who is shown the link, as at creation.
"""

from __future__ import annotations

import logging
import secrets
import smtplib
from email.message import EmailMessage
from typing import Any

from flask import current_app, has_request_context, request
from sqlalchemy import func, select, update

from app.domain.accounts import (
    INVITATION_LIFETIME,
    check_new_password,
    check_public_url,
    invitation_problem,
    invitation_token_hash,
)
from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import OperatorInvitation, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import plausible_id
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)
MAX_TOKEN_LENGTH = 200


def public_url() -> str | None:
    """``PUBLIC_URL`` without its final slash, or None when unset or not a valid address
    (`check_public_url`; the console refuses to start with an invalid one, FOUR-6)."""
    value = current_app.config.get("PUBLIC_URL")
    if not value:
        return None
    try:
        return check_public_url(value)
    except ValueError:
        log.warning("PUBLIC_URL is not a valid address: invitations are not mailed")
        return None


def mail_configured() -> bool:
    """Whether invitations go by mail to the invitee (FOUR-6): only when ``MAIL_SERVER``
    and ``PUBLIC_URL`` are both set, since a mailed link is built from ``PUBLIC_URL`` alone."""
    return bool(current_app.config.get("MAIL_SERVER")) and public_url() is not None


def unusable_password_hash() -> str:
    """A password hash nobody can match: the hash of a random value thrown away. An
    invited account signs in like any other with a wrong password (same cost, SEC-6)."""
    holder = OperatorUser()
    holder.set_password(secrets.token_urlsafe(32))
    return holder.password_hash


def issue(uow: UnitOfWork, context: ApplyContext, operator: OperatorUser, delivery: str) -> str:
    """Issue a new invitation for `operator` in `uow`, revoking its open ones (FOUR-6).

    Args:
        context: the installation and the actor of the ``operator.invited`` audit row.
        delivery: ``mail`` or ``approver`` (recorded in the audit row).

    Returns:
        The token (256 random bits, URL-safe): hand it to `deliver` after commit, never store it.
    """
    now = utcnow()
    uow.session.execute(
        update(OperatorInvitation)
        .where(
            OperatorInvitation.operator_id == operator.id,
            OperatorInvitation.used_at.is_(None),
            OperatorInvitation.revoked_at.is_(None),
        )
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    token = secrets.token_urlsafe(32)
    invitation = OperatorInvitation(
        installation_id=operator.installation_id,
        operator_id=operator.id,
        token_hash=invitation_token_hash(token),
        created_by=f"{context.actor.type}:{context.actor.id}",
        expires_at=now + INVITATION_LIFETIME,
    )
    uow.session.add(invitation)
    uow.session.flush()
    uow.audit(
        operator.installation_id,
        f"operator-invited:{invitation.id}",
        "operator.invited",
        context.actor,
        "operator_user",
        operator.id,
        context.details(
            {
                "email": operator.email,
                "invitation_id": invitation.id,
                "expires_at": invitation.expires_at.isoformat(),
                "delivery": delivery,
            }
        ),
    )
    return token


def link(token: str, *, mailed: bool = False) -> str:
    """The invitation's address, ``<base>/invitations/<token>`` (FOUR-6).

    Args:
        token: from `issue`.
        mailed: True for the link in a mail: its base is ``PUBLIC_URL`` only. Otherwise
            (shown to the approving admin in their own browser) ``PUBLIC_URL`` when set,
            else the request's host, else none (a path, e.g. for the CLI).

    Raises:
        RuntimeError: `mailed` while ``PUBLIC_URL`` is unset (`mail_configured` is false then).
    """
    base = public_url()
    if base is None:
        if mailed:
            raise RuntimeError("a mailed invitation link needs PUBLIC_URL")
        base = request.host_url.rstrip("/") if has_request_context() else ""
    return f"{base}/invitations/{token}"


def _send_mail(email: str, display_name: str, url: str) -> None:
    message = EmailMessage()
    message["From"] = current_app.config.get("MAIL_SENDER") or "console@localhost"
    message["To"] = email
    message["Subject"] = "Your account on the action console"
    hours = int(INVITATION_LIFETIME.total_seconds() // 3600)
    message.set_content(
        f"Hello {display_name},\n\nan account was created for you on the action console.\n"
        f"Set your password with this link, within {hours} hours; it works once:\n\n{url}\n\n"
        "If you did not expect this, ignore this message.\n"
    )
    config = current_app.config
    with smtplib.SMTP(config["MAIL_SERVER"], int(config.get("MAIL_PORT") or 25), timeout=10) as smtp:
        if config.get("MAIL_STARTTLS"):
            smtp.starttls()
        smtp.send_message(message)


def deliver(shown_once: dict[str, Any]) -> dict[str, Any]:
    """Hand a just-committed invitation to whom may have it (FOUR-6): by mail to the
    invitee when `mail_configured` (the link on ``PUBLIC_URL``), else back to the caller
    to show once.

    Args:
        shown_once: ``{"operator_id", "invitation_token"}`` from `issue`'s change.

    Returns:
        ``invitation_sent_to`` (the e-mail), ``invitation_mail_failed`` (why; the
        admin can re-send), or ``invitation_link`` (show it this once).
    """
    operator = db.session.get(OperatorUser, shown_once["operator_id"])
    if not mail_configured():
        return {"invitation_link": link(shown_once["invitation_token"])}
    try:
        _send_mail(operator.email, operator.display_name, link(shown_once["invitation_token"], mailed=True))
    except (OSError, smtplib.SMTPException) as error:
        log.warning("invitation mail to %s failed: %s", operator.id, error)
        return {"invitation_mail_failed": f"The invitation could not be mailed ({type(error).__name__}). Re-send it."}
    return {"invitation_sent_to": operator.email}


def _by_token(session, token: Any) -> tuple[OperatorInvitation, OperatorUser]:
    if not plausible_id(token) or len(token) > MAX_TOKEN_LENGTH:
        raise ApiError(404, "invitation_not_found", "This invitation link is not valid. Check you copied all of it.")
    invitation = session.scalar(
        select(OperatorInvitation).where(OperatorInvitation.token_hash == invitation_token_hash(token))
    )
    operator = session.get(OperatorUser, invitation.operator_id) if invitation else None
    if invitation is None or operator is None:
        raise ApiError(404, "invitation_not_found", "This invitation link is not valid. Check you copied all of it.")
    problem = invitation_problem(
        expires_at=invitation.expires_at, used_at=invitation.used_at, revoked_at=invitation.revoked_at, now=utcnow()
    )
    if problem:
        raise ApiError(*problem)
    if not operator.active:
        raise ApiError(410, "operator_inactive", "This account is deactivated. Ask an admin.")
    return invitation, operator


def open_invitation(token: str) -> OperatorUser:
    """The operator a usable invitation is for (FOUR-6).

    Raises:
        ApiError: 404 ``invitation_not_found``; 410 ``invitation_used``,
            ``invitation_replaced``, ``invitation_expired``, ``operator_inactive``.
    """
    return _by_token(db.session, token)[1]


def accept_invitation(token: str, password: str, confirm: str) -> OperatorUser:
    """The invitee sets their own password; the invitation is spent (FOUR-6).

    Args:
        token: from the link; password: 12..500 characters; confirm: the same again.

    Returns:
        The operator (their session version bumped: any older session ends).

    Raises:
        ApiError: as `open_invitation`; 400 ``password_invalid``, ``password_mismatch``;
            409 ``invitation_changed`` when the link was used or replaced a moment ago.
    """
    check_new_password(password)
    if password != confirm:
        raise ApiError(400, "password_mismatch", "The two passwords differ.", "confirm")
    with unit_of_work() as uow:
        invitation, operator = _by_token(uow.session, token)
        spent = uow.session.execute(
            update(OperatorInvitation)
            .where(
                OperatorInvitation.id == invitation.id,
                OperatorInvitation.used_at.is_(None),
                OperatorInvitation.revoked_at.is_(None),
            )
            .values(used_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        if spent.rowcount != 1:
            raise ApiError(409, "invitation_changed", "This invitation was used or replaced a moment ago.")
        operator.set_password(password)
        operator.session_version += 1
        uow.audit(
            operator.installation_id,
            f"operator-invitation-accepted:{invitation.id}",
            "operator.invitation_accepted",
            Actor("operator", operator.id),
            "operator_user",
            operator.id,
            {"email": operator.email, "invitation_id": invitation.id},
        )
        operator_id = operator.id
        uow.commit()
    return db.session.get(OperatorUser, operator_id)


def invitation_status(operator_id: str) -> OperatorInvitation | None:
    """The operator's newest invitation while none was accepted (None: nothing waits)."""
    rows = db.session.scalars(
        select(OperatorInvitation)
        .where(OperatorInvitation.operator_id == operator_id)
        .order_by(OperatorInvitation.created_at.desc())
    ).all()
    if not rows or any(row.used_at is not None for row in rows):
        return None
    return rows[0]


def invited_operator_ids(installation_id: str) -> set[str]:
    """The installation's operators who were invited and have not set a password yet."""
    return set(
        db.session.scalars(
            select(OperatorInvitation.operator_id)
            .where(OperatorInvitation.installation_id == installation_id)
            .group_by(OperatorInvitation.operator_id)
            .having(func.count(OperatorInvitation.used_at) == 0)
        )
    )


def _invited(session, installation_id: str, operator_id: Any) -> OperatorUser:
    operator = session.get(OperatorUser, operator_id) if plausible_id(operator_id) else None
    if operator is None or operator.installation_id != installation_id:
        raise ApiError(404, "operator_not_found", "No such operator.")
    invitations = session.scalars(select(OperatorInvitation).where(OperatorInvitation.operator_id == operator.id)).all()
    if not invitations or any(row.used_at is not None for row in invitations):
        raise ApiError(409, "invitation_not_pending", "This user has no invitation waiting: they set their password.")
    if not operator.active:
        raise ApiError(409, "operator_inactive", "Reactivate the user before inviting them again.")
    return operator


def _current_invite(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"operator": _invited(session, installation_id, content["operator_id"]).email}


def _apply_invite(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _invited(uow.session, context.installation_id, content["operator_id"])
    token = issue(uow, context, operator, content["delivery"])
    return {"operator_id": operator.id, "shown_once": {"operator_id": operator.id, "invitation_token": token}}


OPERATOR_INVITE = ChangeType(
    kind=ChangeKind.OPERATOR_INVITE,
    subject_type="operator_user",
    subject="operator_id",
    current=_current_invite,
    summary=lambda content, current: f"New invitation for {current['operator']}",
    apply=_apply_invite,
    deliver=deliver,
)


def resend_invitation(admin: OperatorUser, operator_id: str) -> dict[str, Any] | PendingChange:
    """Re-send an invited user's invitation: a new link, the old one dead (FOUR-6).

    With mail (`mail_configured`: ``MAIL_SERVER`` and ``PUBLIC_URL``) the link goes to
    the invitee only, on ``PUBLIC_URL`` whatever the request's host, so it applies at
    once (one admin); without mail it is an ``operator.invite`` change whose approving admin is shown
    the link (never the admin who asks).

    Returns:
        ``{"operator_id", "invitation_sent_to" | "invitation_mail_failed"}``, or the `PendingChange`.

    Raises:
        ApiError: 404 ``operator_not_found``; 409 ``invitation_not_pending`` (the
            user set their password, or was never invited), ``operator_inactive``.
    """
    content = {"operator_id": operator_id, "delivery": "mail" if mail_configured() else "approver"}
    with unit_of_work() as uow:
        outcome = submit(uow, admin, OPERATOR_INVITE, content)
        uow.commit()
    if isinstance(outcome, PendingChange):
        return outcome
    delivered = deliver(outcome.pop("shown_once"))
    delivered.pop("invitation_link", None)  # never to the admin who asks (mail was configured a moment ago)
    return {**outcome, **delivered}
