"""The second factor of password accounts (SPEC OPS-2): enrolment, the second step of
sign-in, recovery codes, and an admin's reset (a four-eyes change, FOUR-2).

Which accounts need it is `app.domain.second_factor.needs_second_factor`. Every
refusal of a code raises the same ``ApiError`` (401 ``second_factor_refused``, the
domain's ``REFUSAL``) after the same work, whether the code was wrong, used already
or the pending step had expired (SEC-6). Codes never reach the audit trail.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import pyotp
from sqlalchemy import delete, false, or_, select, true, update

from app.domain import second_factor as factor_rules
from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import OperatorRecoveryCode, OperatorUser
from app.models.base import new_id
from app.secret_box import UnreadableSecret
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import plausible_id
from app.services.uow import Actor, UnitOfWork, unit_of_work

ISSUER = "Action console"
# Checked against when there is no operator to check, so that refusing costs the same.
_DUMMY_SECRET = pyotp.random_base32()


@dataclass(frozen=True)
class Enrolment:
    """A seed waiting for its first code: ``secret`` (base32, for manual entry) and
    ``uri`` (``otpauth://totp/...``, what authenticator apps scan)."""

    secret: str
    uri: str


def refused() -> ApiError:
    """The one refusal of a second step (OPS-2, SEC-6)."""
    return ApiError(401, "second_factor_refused", factor_rules.REFUSAL, "code")


def seed_unreadable() -> ApiError:
    """The refusal when this process cannot open an operator's sealed seed (OPS-3):
    its ``SECRETS_KEY`` is not the one the seed was sealed with. A server fault, not
    the operator's (503); fail closed: the TOTP code is not checked, nothing is used up."""
    return ApiError(
        503,
        "second_factor_seed_unreadable",
        "This server cannot read second-factor seeds: its SECRETS_KEY is not the one they were sealed "
        "with. Nothing was changed. Try again in a few minutes, or tell an administrator.",
    )


def _refuse_unreadable(uow: UnitOfWork, operator: OperatorUser | None, stage: str) -> None:
    """Raise `seed_unreadable` (audited, nothing else written) when the operator's seed
    is sealed under a key this process lacks."""
    if operator is not None and isinstance(operator.totp_secret, UnreadableSecret):
        _audit(uow, operator, "operator.second_factor_refused", stage=stage, reason="seed_unreadable")
        uow.commit()
        raise seed_unreadable()


def _hash_recovery(operator_id: str, code: str) -> str:
    return hashlib.sha256(f"{operator_id}:{code}".encode()).hexdigest()


def _new_recovery_codes(uow: UnitOfWork, operator_id: str) -> list[str]:
    """Replace the operator's recovery codes by fresh ones; the codes as shown once."""
    uow.session.execute(delete(OperatorRecoveryCode).where(OperatorRecoveryCode.operator_id == operator_id))
    codes = [
        "".join(secrets.choice(factor_rules.RECOVERY_ALPHABET) for _ in range(factor_rules.RECOVERY_CODE_LENGTH))
        for _ in range(factor_rules.RECOVERY_CODE_COUNT)
    ]
    for code in codes:
        uow.session.add(OperatorRecoveryCode(operator_id=operator_id, code_hash=_hash_recovery(operator_id, code)))
    return [factor_rules.show_recovery_code(code) for code in codes]


def _audit(uow: UnitOfWork, operator: OperatorUser, action: str, actor: Actor | None = None, **details) -> None:
    uow.audit(
        operator.installation_id,
        f"second-factor:{action}:{operator.id}:{new_id('sf')}",
        action,
        actor or Actor("operator", operator.id),
        "operator_user",
        operator.id,
        {"email": operator.email, **details},
    )


def _operator(session, operator_id: Any) -> OperatorUser | None:
    return session.get(OperatorUser, operator_id) if plausible_id(operator_id) else None


def _matching_step(secret: str, code: str, now: float) -> int | None:
    """The step in the window around ``now`` whose code is ``code`` (every step is
    computed and compared in constant time, whichever matches)."""
    totp, found = pyotp.TOTP(secret), None
    now_step = factor_rules.time_step(now)
    for step in factor_rules.candidate_steps(now_step, None):
        if hmac.compare_digest(totp.at(step * factor_rules.STEP_SECONDS), code.rjust(6, "x")):
            found = step
    return found


def uri_for(operator: OperatorUser, secret: str) -> str:
    """The ``otpauth://`` URI of a seed, labelled with the operator's email."""
    return pyotp.TOTP(secret).provisioning_uri(name=operator.email, issuer_name=ISSUER)


def start_enrolment(operator_id: str, *, renew: bool = False) -> Enrolment:
    """The seed an operator enrols with (OPS-2): a new one, or the one shown before
    while enrolment is not confirmed (a reload shows the same seed).

    Args:
        renew: a new seed even if one was shown before: a sign-in's first view of
            enrolment, so whoever saw an earlier sign-in's seed (knowing only the
            password) holds nothing once the account's holder enrols.

    Raises:
        ApiError: 404 ``operator_not_found``; 409 ``second_factor_enrolled`` when the
            operator's second factor is in force already (an admin resets it first);
            503 ``second_factor_seed_unreadable`` (`seed_unreadable`).
    """
    with unit_of_work() as uow:
        operator = _operator(uow.session, operator_id)
        if operator is None:
            raise ApiError(404, "operator_not_found", "No such operator.")
        if operator.totp_confirmed_at is not None:
            raise ApiError(409, "second_factor_enrolled", "This account has a second factor already.")
        if not renew:  # a renewed seed replaces an unreadable one: it was never confirmed
            _refuse_unreadable(uow, operator, "enrolment")
        if renew or not operator.totp_secret:
            operator.totp_secret = pyotp.random_base32()
        secret = operator.totp_secret
        enrolment = Enrolment(secret, uri_for(operator, secret))
        uow.commit()
    return enrolment


def load_operator(operator_id: str) -> OperatorUser | None:
    """The operator with this id, or None."""
    return _operator(db.session, operator_id)


def confirm_enrolment(operator_id: str, code: Any, *, session_version: int | None = None) -> list[str]:
    """Confirm enrolment with a first code of the seed `start_enrolment` gave (OPS-2).

    The code's time step counts as used; ten recovery codes are made.

    Args:
        session_version: the version the pending sign-in saw; another one (the account
            was deactivated or its roles changed meanwhile) is refused.

    Returns:
        The recovery codes, as shown once (``ABCDE-FGHJK``); only their hashes are kept.

    Raises:
        ApiError: 401 ``second_factor_refused`` (audited as
            ``operator.second_factor_refused``); 409 ``second_factor_enrolled``;
            503 ``second_factor_seed_unreadable`` (`seed_unreadable`).
    """
    kind, code = factor_rules.code_kind(code)
    now = time.time()
    with unit_of_work() as uow:
        operator = _operator(uow.session, operator_id)
        if operator is None:
            raise refused()
        if operator.totp_confirmed_at is not None:
            raise ApiError(409, "second_factor_enrolled", "This account has a second factor already.")
        _refuse_unreadable(uow, operator, "enrolment")
        step = _matching_step(operator.totp_secret or _DUMMY_SECRET, code if kind == "totp" else "", now)
        stale = session_version is not None and session_version != operator.session_version
        if step is None or not operator.totp_secret or stale or not operator.active:
            _audit(uow, operator, "operator.second_factor_refused", stage="enrolment", reason="wrong")
            uow.commit()
            raise refused()
        operator.totp_confirmed_at = utcnow()
        operator.totp_last_step = step
        operator.second_factor_required = True  # kept by a reset (OPS-2)
        shown = _new_recovery_codes(uow, operator.id)
        _audit(uow, operator, "operator.second_factor_enrolled", recovery_codes=len(shown))
        uow.commit()
    return shown


def enrol_operator(operator_id: str, secret: str, *, actor: Actor) -> list[str]:
    """Enrol an operator at once with a seed chosen by the caller: the demo seed
    (``flask demo`` prints the seeds) and test builders, which know their seeds.
    Admins cannot do this: holders enrol themselves at sign-in (OPS-2).

    Args:
        secret: a base32 TOTP seed.

    Returns:
        The recovery codes, as shown once.

    Raises:
        ApiError: 404 ``operator_not_found``; 400 ``second_factor_seed_invalid``.
    """
    try:
        pyotp.TOTP(secret).now()
    except Exception as error:  # binascii.Error, ValueError: not base32
        raise ApiError(400, "second_factor_seed_invalid", "The seed is not base32 text.") from error
    with unit_of_work() as uow:
        operator = _operator(uow.session, operator_id)
        if operator is None:
            raise ApiError(404, "operator_not_found", "No such operator.")
        operator.totp_secret = secret
        operator.totp_confirmed_at = utcnow()
        operator.totp_last_step = None
        operator.second_factor_required = True
        shown = _new_recovery_codes(uow, operator.id)
        _audit(uow, operator, "operator.second_factor_enrolled", actor, recovery_codes=len(shown))
        uow.commit()
    return shown


def _consume(operator: OperatorUser | None, step: int | None, recovery, usable: bool):
    """The one UPDATE every second step runs: use up the TOTP step (only a later one
    than the last used) or the recovery code (only an unused one); it matches no row
    when there is nothing to use or the step may not be used (SEC-6: the same work)."""
    allowed = true() if usable else false()
    if operator is not None and step is not None:
        return (
            update(OperatorUser)
            .where(
                allowed,
                OperatorUser.id == operator.id,
                or_(OperatorUser.totp_last_step.is_(None), OperatorUser.totp_last_step < step),
            )
            .values(totp_last_step=step)
        )
    recovery_id = recovery.id if recovery is not None else "none"
    return (
        update(OperatorRecoveryCode)
        .where(allowed, OperatorRecoveryCode.id == recovery_id, OperatorRecoveryCode.used_at.is_(None))
        .values(used_at=utcnow())
    )


def verify_second_factor(
    operator_id: str | None, code: Any, *, step_valid: bool = True, session_version: int | None = None
) -> OperatorUser:
    """The second step of a sign-in (OPS-2): a TOTP code of the step before, at or
    after now, not used before, or an unused recovery code (then used up).

    Every call does the same work — loads the operator and their recovery codes,
    computes every code of the window and compares in constant time — before it
    looks at why it might refuse, so a wrong code, a reused code and an expired
    pending step (``step_valid=False``) are refused alike (SEC-6).

    Args:
        operator_id: the operator the pending step is for (None when there is none).
        code: as typed: 6 digits, or a recovery code (dashes and spaces ignored).
        step_valid: False when the pending step expired: always refused.
        session_version: the version the pending sign-in saw; another one (the account
            was deactivated, reset or its roles changed meanwhile) counts as expired.

    Returns:
        The operator, signed-in-able; success audited as ``operator.second_factor_passed``.

    Raises:
        ApiError: 401 ``second_factor_refused``, audited as
            ``operator.second_factor_refused`` with a reason (never the code);
            503 ``second_factor_seed_unreadable`` for a TOTP code when this process
            cannot open the operator's seed (OPS-3, `seed_unreadable`): nothing is
            used up. A recovery code (kept as a hash, not sealed) is checked as usual,
            so a lost ``SECRETS_KEY`` does not lock every enrolled account out.
    """
    kind, code = factor_rules.code_kind(code)
    now = time.time()
    with unit_of_work() as uow:
        operator = _operator(uow.session, operator_id)
        if kind != "recovery":  # recovery codes are hashes, not sealed: they still work
            _refuse_unreadable(uow, operator, "sign_in")
        enrolled = operator is not None and operator.totp_confirmed_at is not None and bool(operator.totp_secret)
        readable = enrolled and not isinstance(operator.totp_secret, UnreadableSecret)
        secret = operator.totp_secret if readable else _DUMMY_SECRET
        owner = operator.id if operator is not None else "none"
        stored = uow.session.execute(
            select(OperatorRecoveryCode.id, OperatorRecoveryCode.code_hash, OperatorRecoveryCode.used_at).where(
                OperatorRecoveryCode.operator_id == owner
            )
        ).all()
        step = _matching_step(secret, code if kind == "totp" else "", now)
        wanted = _hash_recovery(owner, code if kind == "recovery" else "")
        recovery = None
        for row in stored:
            if hmac.compare_digest(row.code_hash, wanted):
                recovery = row
        if operator is not None and session_version is not None and session_version != operator.session_version:
            step_valid = False
        usable = step_valid and enrolled and operator.active
        taken = uow.session.execute(_consume(operator, step, recovery, usable)).rowcount == 1  # one round trip always
        if not usable:
            reason = "expired" if not step_valid else "not_enrolled"
        elif step is None and recovery is None:
            reason = "wrong"
        else:
            reason = None if taken else "reused"
        if operator is None:
            uow.commit()
            raise refused()
        if reason is not None:
            _audit(uow, operator, "operator.second_factor_refused", stage="sign_in", reason=reason)
            uow.commit()
            raise refused()
        left = sum(1 for row in stored if row.used_at is None) - (1 if recovery is not None and step is None else 0)
        _audit(
            uow,
            operator,
            "operator.second_factor_passed",
            method="totp" if step is not None else "recovery_code",
            recovery_codes_left=left,
        )
        operator.last_login_at = utcnow()
        uow.commit()
    return db.session.get(OperatorUser, operator_id)


def regenerate_recovery_codes(operator_id: str, code: Any) -> list[str]:
    """New recovery codes for an enrolled operator, after a fresh code (OPS-2): the
    old ones stop working.

    Returns:
        The new codes, as shown once.

    Raises:
        ApiError: 401 ``second_factor_refused`` (a wrong or used code).
    """
    operator = verify_second_factor(operator_id, code)
    with unit_of_work() as uow:
        shown = _new_recovery_codes(uow, operator.id)
        _audit(uow, uow.session.get(OperatorUser, operator.id), "operator.recovery_codes_regenerated")
        uow.commit()
    return shown


def recovery_codes_left(operator_id: str) -> int:
    """How many of the operator's recovery codes are unused."""
    return len(
        db.session.scalars(
            select(OperatorRecoveryCode.id).where(
                OperatorRecoveryCode.operator_id == operator_id, OperatorRecoveryCode.used_at.is_(None)
            )
        ).all()
    )


# --- an admin's reset: four-eyes -----------------------------------------------------


def _reset_target(session, installation_id: str, operator_id: Any) -> OperatorUser:
    operator = _operator(session, operator_id)
    if operator is None or operator.installation_id != installation_id:
        raise ApiError(404, "operator_not_found", "No such operator.")
    return operator


def _reset_current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    operator = _reset_target(session, installation_id, content["operator_id"])
    return {
        "account": f"{operator.display_name} <{operator.email}>",
        "roles": sorted(operator.roles),
        "second_factor": "enrolled" if operator.totp_confirmed_at else "not enrolled",
    }


def _apply_reset(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    operator = _reset_target(uow.session, context.installation_id, content["operator_id"])
    operator.totp_secret = None
    operator.totp_confirmed_at = None
    operator.totp_last_step = None
    operator.second_factor_required = True  # whatever the role: enrol again, never password-only
    operator.session_version += 1  # a lost device: the sessions it opened end now
    uow.session.execute(delete(OperatorRecoveryCode).where(OperatorRecoveryCode.operator_id == operator.id))
    uow.audit(
        context.installation_id,
        f"admin:second-factor-reset:{operator.id}:{new_id('sf')}",
        "admin.operator_second_factor_reset",
        context.actor,
        "operator_user",
        operator.id,
        context.details({"email": operator.email, "session_version": operator.session_version}),
    )
    return {"operator_id": operator.id}


SECOND_FACTOR_RESET = ChangeType(
    kind=ChangeKind.OPERATOR_SECOND_FACTOR_RESET,
    subject_type="operator_user",
    subject="operator_id",
    current=_reset_current,
    summary=lambda content, current: f"Reset the second factor of {(current or {}).get('account', 'an account')}",
    apply=_apply_reset,
)


def reset_second_factor(admin: OperatorUser, operator_id: str) -> PendingChange:
    """Propose resetting an operator's second factor (OPS-2): once a second admin
    approves, their seed and recovery codes are gone, their sessions end, and they
    must enrol again at their next sign-in, whatever their role (a moderator who had
    enrolled voluntarily too: ``second_factor_required`` stays set).

    Four-eyes (FOUR-2): whoever knows the account's password could enrol their own
    device after a reset, so one admin alone must not be able to open a reviewer's
    or admin's account to a password only.

    Raises:
        ApiError: 404 ``operator_not_found`` (also another installation's).
    """
    with unit_of_work() as uow:
        operator = _reset_target(uow.session, admin.installation_id, operator_id)
        outcome = submit(uow, admin, SECOND_FACTOR_RESET, {"operator_id": operator.id})
        if not isinstance(outcome, PendingChange):
            raise RuntimeError("a second-factor reset would apply without a second admin")
        uow.commit()
    return outcome
