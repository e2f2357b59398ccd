"""HTTP: the console (server-rendered, htmx) and the JSON API for platforms."""

from __future__ import annotations

import json

from flask import Flask, request
from flask_login import AnonymousUserMixin

from app.domain.clock import iso
from app.domain.states import is_terminal
from app.extensions import csrf, db, login_manager
from app.models import OperatorUser

from .errors import register_error_handlers


class Anonymous(AnonymousUserMixin):
    roles = frozenset()

    def has_role(self, *roles: str) -> bool:
        return False


@login_manager.user_loader
def load_operator(session_id: str) -> OperatorUser | None:
    """Sessions carry ``{operator id}:{session version}``; a bumped version logs out."""
    operator_id, _, version = session_id.rpartition(":")
    operator = db.session.get(OperatorUser, operator_id)
    if operator is None or str(operator.session_version) != version or not operator.active:
        return None
    return operator


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def register_web(app: Flask) -> None:
    from .admin import bp as admin_bp
    from .api import bp as api_bp
    from .auth import bp as auth_bp
    from .console import bp as console_bp

    login_manager.login_view = "auth.login"
    login_manager.anonymous_user = Anonymous
    login_manager.session_protection = "basic"
    app.register_blueprint(auth_bp)
    app.register_blueprint(console_bp)
    app.register_blueprint(admin_bp, url_prefix="/admin")
    app.register_blueprint(api_bp, url_prefix="/api/v1")
    csrf.exempt(api_bp)  # platforms authenticate with bearer tokens, not cookies
    register_error_handlers(app)
    app.jinja_env.filters["pretty_json"] = pretty_json
    app.jinja_env.filters["iso"] = iso
    app.jinja_env.globals["is_terminal"] = is_terminal

    @app.after_request
    def _headers(response):
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        response.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "frame-ancestors 'none'; form-action 'self'; base-uri 'self'",
        )
        if not request.path.startswith(("/api/", "/static/")):
            response.vary.add("HX-Request")
            response.headers.setdefault("Cache-Control", "no-store")
        return response
