"""The second step of signing in, and an operator's own second factor (SPEC OPS-2).

After a right password, an account that needs a second factor is not signed in: the
session holds only a pending marker (operator, session version, when, a nonce), which
grants nothing and expires after ``SECOND_FACTOR_PENDING_SECONDS``. The code page signs
the operator in; the enrolment page first confirms a new seed. Any refusal ends the
pending step and answers the sign-in page with one message (SEC-6).

The session is a signed cookie the browser keeps, so "ends" is recorded on the server
too: a refused or used marker's nonce is spent in Redis for the marker's lifetime, and a
cookie replayed from before the refusal finds its step ended. Losing Redis forgets spent
nonces for at most that lifetime; the failure count still limits the guesses.
"""

from __future__ import annotations

import time

from flask import current_app, make_response, redirect, render_template, session, url_for
from flask_login import current_user, login_required, login_user
from redis.exceptions import RedisError

from app.domain.errors import ApiError
from app.extensions import limiter
from app.queueing import get_redis
from app.services.admin import mfa as service

from .blueprint import bp
from .forms import CodeForm, LoginForm

PENDING = "second_factor_pending"


def _pending() -> dict | None:
    """The pending second step of this session, if any (it may have expired)."""
    pending = session.get(PENDING)
    return pending if isinstance(pending, dict) and isinstance(pending.get("operator_id"), str) else None


SPENT_PREFIX = "second-factor-spent:"


def _spent_key(pending: dict) -> str | None:
    nonce = pending.get("nonce")
    return SPENT_PREFIX + nonce if isinstance(nonce, str) and nonce else None


def _spend(pending: dict | None) -> None:
    """Record on the server that this pending step has ended (OPS-2, SEC-6)."""
    key = _spent_key(pending or {})
    if key is None:
        return
    try:
        get_redis().set(key, "1", ex=int(current_app.config["SECOND_FACTOR_PENDING_SECONDS"]) + 60)
    except RedisError:  # the failure count still bounds guesses; the marker expires soon
        current_app.logger.warning("could not record an ended second-factor step")


def _spent(pending: dict) -> bool:
    key = _spent_key(pending)
    if key is None:
        return True  # a marker from before nonces: start again with the password
    try:
        return bool(get_redis().exists(key))
    except RedisError:
        return False


def _fresh(pending: dict | None) -> bool:
    if pending is None:
        return False
    age = time.time() - float(pending.get("started") or 0)
    return 0 <= age <= current_app.config["SECOND_FACTOR_PENDING_SECONDS"] and not _spent(pending)


def _failure_key() -> str:
    # Per account: the password is known to whoever reaches this step, so guesses
    # of its codes are counted wherever they come from.
    if current_user.is_authenticated:
        return f"second-factor-failures:{current_user.id}"
    pending = _pending() or {}
    return f"second-factor-failures:{pending.get('operator_id', 'none')}"


def _no_store(page, status: int):
    """Seeds and recovery codes are shown once: never cached, never sent on."""
    response = make_response(page, status)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def _refused(error: ApiError):
    """Every refusal alike: the pending step ends; the sign-in page says why (SEC-6)."""
    _spend(session.pop(PENDING, None))
    return render_template("auth/login.html", form=LoginForm(formdata=None), error=error.message), 401


def _rate_limited(view):
    view = limiter.limit(
        lambda: current_app.config["LOGIN_FAILURE_LIMIT"],
        methods=["POST"],
        key_func=_failure_key,
        deduct_when=lambda response: response.status_code == 401,
    )(view)
    return limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], methods=["POST"])(view)


def _sign_in(operator, pending: dict):
    _spend(session.pop(PENDING, None))
    login_user(operator)
    return pending.get("next") or url_for("console.index")


@bp.route("/login/second-factor", methods=["GET", "POST"])
@_rate_limited
def second_factor():
    """The code page (OPS-2): a TOTP code or a recovery code signs the pending operator in.

    Answers 303 to where the sign-in was going; 401 with the sign-in page for any
    refusal (wrong, used, expired); 400 for a form without its CSRF token; 503
    ``second_factor_seed_unreadable`` when this server cannot open the seed (OPS-3).
    """
    pending, form = _pending(), CodeForm()
    if not form.is_submitted():
        if not _fresh(pending):
            return redirect(url_for("auth.login"))
        return render_template("auth/second_factor.html", form=form), 200
    if not form.validate():
        raise ApiError(400, "form_invalid", "The form could not be read. Reload the page and try again.")
    try:
        operator = service.verify_second_factor(
            (pending or {}).get("operator_id"),
            form.code.data,
            step_valid=_fresh(pending),
            session_version=(pending or {}).get("session_version"),
        )
    except ApiError as error:
        if error.status != 401:
            raise
        return _refused(error)
    return redirect(_sign_in(operator, pending), code=303)


@bp.route("/login/enrol", methods=["GET", "POST"])
@_rate_limited
def enrol():
    """Enrolment at sign-in (OPS-2): the seed (otpauth URI and text), confirmed with a
    first code; then the recovery codes, shown once, and the operator is signed in."""
    pending, form = _pending(), CodeForm()
    if not form.is_submitted():
        if not _fresh(pending):
            return redirect(url_for("auth.login"))
        try:  # each sign-in enrols with its own seed; a reload of this page shows it again
            enrolment = service.start_enrolment(pending["operator_id"], renew=not pending.get("seeded"))
            session[PENDING] = {**pending, "seeded": True}
        except ApiError as error:  # enrolled meanwhile, or gone: start again
            if error.status == 503:  # this server cannot read the seed (OPS-3)
                raise
            session.pop(PENDING, None)
            return redirect(url_for("auth.login"))
        return _no_store(render_template("auth/enrol.html", form=form, enrolment=enrolment), 200)
    if not form.validate():
        raise ApiError(400, "form_invalid", "The form could not be read. Reload the page and try again.")
    try:
        if not _fresh(pending):
            service.verify_second_factor((pending or {}).get("operator_id"), form.code.data, step_valid=False)
        codes = service.confirm_enrolment(
            pending["operator_id"], form.code.data, session_version=pending.get("session_version")
        )
    except ApiError as error:
        if error.status not in (401, 409):
            raise
        return _refused(service.refused())
    operator = service.load_operator(pending["operator_id"])
    target = _sign_in(operator, pending)
    return _no_store(render_template("auth/recovery_codes.html", codes=codes, next_url=target), 200)


# --- an operator's own second factor, signed in ------------------------------------


@bp.route("/account/second-factor", methods=["GET"])
@login_required
def account_second_factor():
    """Enrol voluntarily (a moderator or auditor; then it is required, OPS-2), or see
    how many recovery codes are left and make new ones."""
    enrolment = None
    if current_user.totp_confirmed_at is None:
        enrolment = service.start_enrolment(current_user.id)
    left = service.recovery_codes_left(current_user.id)
    page = render_template("auth/account_second_factor.html", form=CodeForm(), enrolment=enrolment, left=left)
    return _no_store(page, 200)


@bp.route("/account/second-factor", methods=["POST"])
@login_required
@_rate_limited
def account_second_factor_post():
    """Confirm a voluntary enrolment, or regenerate recovery codes after a fresh code.

    Answers 200 with the recovery codes shown once; 401 with the page and the one
    refusal message; 400 for a form without its CSRF token.
    """
    form = CodeForm()
    if not form.validate():
        raise ApiError(400, "form_invalid", "The form could not be read. Reload the page and try again.")
    try:
        if current_user.totp_confirmed_at is None:
            codes = service.confirm_enrolment(current_user.id, form.code.data)
        else:
            codes = service.regenerate_recovery_codes(current_user.id, form.code.data)
    except ApiError as error:
        if error.status != 401:
            raise
        enrolment = service.start_enrolment(current_user.id) if current_user.totp_confirmed_at is None else None
        page = render_template(
            "auth/account_second_factor.html",
            form=form,
            enrolment=enrolment,
            left=service.recovery_codes_left(current_user.id),
            error=error.message,
        )
        return _no_store(page, 401)
    page = render_template("auth/recovery_codes.html", codes=codes, next_url=url_for("auth.account_second_factor"))
    return _no_store(page, 200)
