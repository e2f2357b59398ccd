from __future__ import annotations

from urllib.parse import urlsplit

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_limiter.util import get_remote_address
from flask_login import current_user, login_user, logout_user

from app.extensions import limiter
from app.services.admin.operators import authenticate_operator

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
    signed_in = current_user.is_authenticated
    logout_user()
    if signed_in:
        flash("You are signed out.", "ok")
    return redirect(url_for("auth.login"), code=303)
