"""HTTP: the console (server-rendered, htmx) and the JSON API for platforms."""

from __future__ import annotations

import logging
import re
import time
import uuid

from flask import Flask, g, request
from flask_login import AnonymousUserMixin, current_user

from app.domain.clock import iso
from app.domain.errors import ApiError
from app.domain.evidence import link_host
from app.domain.case_states import OPEN_CORRECTION_STATES, AppealMove, ReportMove, can_move
from app.domain.states import is_effective, is_terminal, is_waiting
from app.extensions import csrf, db, login_manager
from app.models import OperatorUser
from app.observability import pop, push

from .errors import register_error_handlers
from .formatting import action_heading, bidi_text, erased_note, pretty_json, time_tag


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


REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")


def register_request_logging(app: Flask) -> None:
    """One JSON line per request, with its request id and operator (issue: observability)."""
    log = logging.getLogger("app.web.request")

    @app.before_request
    def _refuse_nul() -> None:
        # No id or text ever holds a NUL character; PostgreSQL would refuse it.
        if "\x00" in request.path:
            raise ApiError(404, "not_found", "No such page.")
        if any("\x00" in value for source in (request.args, request.form) for value in source.values()):
            raise ApiError(400, "invalid_characters", "The request holds a NUL character.")

    @app.before_request
    def _bind_request() -> None:
        supplied = request.headers.get("X-Request-ID", "")
        g.request_id = supplied if REQUEST_ID.match(supplied) else uuid.uuid4().hex
        g.request_started = time.monotonic()
        g.log_token = push(request_id=g.request_id)

    @app.after_request
    def _log_request(response):
        response.headers["X-Request-ID"] = getattr(g, "request_id", "")
        if not request.path.startswith("/static/"):
            operator = current_user.get_id() if current_user and current_user.is_authenticated else None
            log.info(
                "request",
                extra={
                    "method": request.method,
                    # An invitation's token is a one-time password: never in the logs (FOUR-6).
                    "path": "/invitations/…" if request.path.startswith("/invitations/") else request.path,
                    "status": response.status_code,
                    "duration_ms": round(
                        (time.monotonic() - getattr(g, "request_started", time.monotonic())) * 1000, 1
                    ),
                    "operator_id": operator.rsplit(":", 1)[0] if operator else None,
                },
            )
        return response

    @app.teardown_request
    def _unbind(_error=None) -> None:
        token = g.pop("log_token", None)
        if token is not None:
            pop(token)


def register_web(app: Flask) -> None:
    from .admin import bp as admin_bp
    from .api import bp as api_bp
    from .auth import bp as auth_bp
    from .console import bp as console_bp
    from .health import bp as health_bp

    login_manager.login_view = "auth.login"
    login_manager.anonymous_user = Anonymous
    login_manager.session_protection = "strong" if app.config["CONSOLE_ENV"] == "production" else "basic"
    app.register_blueprint(auth_bp)
    app.register_blueprint(console_bp)
    app.register_blueprint(admin_bp, url_prefix="/admin")
    app.register_blueprint(health_bp)
    register_request_logging(app)
    app.register_blueprint(api_bp, url_prefix="/api/v1")
    csrf.exempt(api_bp)  # platforms authenticate with bearer tokens, not cookies
    register_error_handlers(app)
    app.jinja_env.filters["pretty_json"] = pretty_json
    app.jinja_env.filters["iso"] = iso
    app.jinja_env.filters["link_host"] = link_host  # the host an external link opens (FOUR-10)
    app.jinja_env.filters["time"] = time_tag  # a filter, not a macro: pages render hundreds
    # the Python behind the `time` and `platform_text` of templates/_macros (a macro call costs more)
    app.jinja_env.globals.update(time_tag=time_tag, bidi_text=bidi_text, action_heading=action_heading)
    app.jinja_env.globals["erased_note"] = erased_note  # OPS-4: what was erased and when
    app.jinja_env.globals["is_terminal"] = is_terminal  # the named predicates (§3)
    app.jinja_env.globals["is_waiting"] = is_waiting
    app.jinja_env.globals["is_effective"] = is_effective
    # the case objects' machines: a page offers a move only where its table allows it
    app.jinja_env.globals["can_move"] = can_move
    app.jinja_env.globals.update(ReportMove=ReportMove, AppealMove=AppealMove)
    app.jinja_env.globals["OPEN_CORRECTION_STATES"] = OPEN_CORRECTION_STATES
    from app.domain.failures import connection_event_words, failure_words

    app.jinja_env.globals["failure_words"] = failure_words  # failures in words (QUEUE-6)
    app.jinja_env.globals["connection_event_words"] = connection_event_words
    from app.domain.subject_names import action_title
    from app.services.read.named_subjects import subject_names

    def page_subject_names(proposals, marks=None):
        """`subject_names` once per page and set of proposals: a page naming the same
        proposals twice (title and heading) reads them once (QUEUE-6, POL-4)."""
        from flask import has_request_context, request

        proposals = [p for p in proposals if p is not None]
        if not has_request_context():
            return subject_names(proposals, marks)
        key = (tuple(p.id for p in proposals), marks is not None)
        cache = request.environ.setdefault("console.subject_names", {})  # this request's only
        if key not in cache:
            cache[key] = subject_names(proposals, marks)
        return cache[key]

    app.jinja_env.globals["subject_names"] = page_subject_names  # once per page: one query (QUEUE-6)
    app.jinja_env.globals["action_title"] = action_title
    from app.domain.proposal.temporary import format_duration

    app.jinja_env.filters["duration"] = format_duration  # "7 days", "3 minutes" (TEMP-1)
    from .labels import register_labels
    from .navigation import register_navigation

    register_labels(app)
    register_navigation(app)
    from .badges import register_badges

    register_badges(app)  # the row pieces of templates/_macros/ui.html, as Python (issue 25)
    from .templating import register_templating

    register_templating(app)  # macro imports that find the cached module fast

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
        if app.config["CONSOLE_ENV"] == "production":
            response.headers.setdefault("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
        if not request.path.startswith(("/api/", "/static/")):
            response.vary.add("HX-Request")
            response.headers.setdefault("Cache-Control", "no-store")
        return response
