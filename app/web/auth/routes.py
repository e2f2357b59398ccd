from __future__ import annotations

from urllib.parse import urlsplit

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_limiter.util import get_remote_address
from flask_login import current_user, login_user, logout_user
from sqlalchemy.exc import SQLAlchemyError

from app.domain.errors import ApiError
from app.extensions import limiter
from app.services.admin.operators import authenticate_operator, end_sessions

from .blueprint import bp
from .forms import LoginForm


def _safe_next(target: str | None) -> str:
    """Only same-site paths: never redirect to another host after login."""
    if not target:
        return url_for("console.proposals")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("console.proposals")
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
        return redirect(url_for("console.proposals"))
    form = LoginForm()
    error = None
    if form.validate_on_submit():
        operator = authenticate_operator(form.email.data, form.password.data)
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
