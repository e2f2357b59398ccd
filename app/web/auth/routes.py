from __future__ import annotations

import secrets
import time
from urllib.parse import urlsplit

from flask import current_app, flash, make_response, redirect, render_template, request, session, url_for
from flask_limiter.util import get_remote_address
from flask_login import current_user, login_user, logout_user
from sqlalchemy.exc import SQLAlchemyError

from app.domain.errors import ApiError
from app.domain.second_factor import needs_second_factor
from app.extensions import limiter
from app.services.admin import invitations
from app.services.admin.operators import authenticate_operator, end_sessions

from .blueprint import bp
from .forms import InvitationForm, LoginForm
from .second_factor import PENDING


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never redirect to another host after login."""
    if not target:
        return url_for("console.index")  # landed by role (QUEUE-5)
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("console.index")  # landed by role (QUEUE-5)
    return target


def _email_key() -> str:
    # Per account and client address: someone elsewhere cannot lock a user out.
    email = (request.form.get("email") or "").strip().lower()[:320]
    return f"login-failures:{get_remote_address()}:{email}"


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], methods=["POST"])
@limiter.limit(
    lambda: current_app.config["LOGIN_FAILURE_LIMIT"],
    methods=["POST"],
    key_func=_email_key,
    deduct_when=lambda response: response.status_code == 401,
)
def login():
    if current_user.is_authenticated:
        return redirect(url_for("console.index"))
    form = LoginForm()
    error = None
    if form.validate_on_submit():
        operator = authenticate_operator(form.email.data, form.password.data)
        session.pop(PENDING, None)
        if operator is not None and needs_second_factor(operator):  # OPS-2: not signed in yet
            session[PENDING] = {
                "operator_id": operator.id,
                "session_version": operator.session_version,
                "started": time.time(),
                "nonce": secrets.token_urlsafe(16),  # spent on its first answer (second_factor.spend)
                "next": _safe_next(request.args.get("next")),
            }
            step = "auth.second_factor" if operator.totp_confirmed_at else "auth.enrol"
            return redirect(url_for(step), code=303)
        if operator is not None:
            login_user(operator)
            return redirect(_safe_next(request.args.get("next")), code=303)
        error = "The email or password is not right, or the account is disabled."
    status = 401 if error else 200
    return render_template("auth/login.html", form=form, error=error), status


@bp.route("/logout", methods=["POST"])
def logout():
    """Sign out: every session of this operator ends on the server (SEC-1, REV-5)."""
    if current_user.is_authenticated:
        operator_id, version = current_user.id, current_user.session_version
        logout_user()
        try:
            end_sessions(operator_id, version)
        except SQLAlchemyError as error:  # the cookie is cleared; say the server-side end failed
            raise ApiError(
                503,
                "sign_out_incomplete",
                "You are signed out in this browser, but the console could not end your session on the "
                "server. Sign in and out again once it is back.",
            ) from error
        flash("You are signed out.", "ok")
    return redirect(url_for("auth.login"), code=303)


def _no_referrer(response):
    """The token is in the address: never send it on to another page or site (FOUR-6)."""
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@bp.route("/invitations/<token>", methods=["GET", "POST"])
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], methods=["POST"])
def invitation(token: str):
    """The invitee sets their own password with their one-time link (FOUR-6).

    Answers 404 ``invitation_not_found`` or 410 (used, replaced, expired) as a page;
    400 for a form without its CSRF token or a refused password; 303 to sign-in once set.
    """
    operator = invitations.open_invitation(token)  # 404/410 pages via the error handler
    form = InvitationForm()
    error = None
    if request.method == "POST":
        if not form.validate():
            raise ApiError(400, "form_invalid", "The form could not be read. Reload the page and try again.")
        try:
            invitations.accept_invitation(token, form.password.data, form.confirm.data)
        except ApiError as refused:
            if refused.status != 400:
                raise
            error = refused
        else:
            flash("Your password is set. Sign in with it.", "ok")
            return _no_referrer(redirect(url_for("auth.login"), code=303))
    page = render_template("auth/invitation.html", form=form, operator=operator, error=error)
    return _no_referrer(make_response(page, 400 if error else 200))
