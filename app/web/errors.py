"""Error handlers: JSON for the API, a page or a fragment for people. No bad input
ever produces a 500 page with a stack trace."""

from __future__ import annotations

import logging
import math
import re
import time

from flask import jsonify, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from app.domain.errors import ApiError

from .decorators import is_htmx

log = logging.getLogger(__name__)

# The API publishes 413 by a shorter name than its reason phrase (OpenAPI, clients).
PUBLISHED_CODES = {413: "request_too_large"}


def http_error_code(status: int | None) -> str:
    """The error code a bare HTTP error answers with (e.g. 404: ``not_found``).

    Args:
        status: an HTTP status code, or None.

    Returns:
        Werkzeug's reason phrase in snake case (``method_not_allowed``), the published
        name for 413, or ``http_error`` for a code Werkzeug does not know.
    """
    if status in PUBLISHED_CODES:
        return PUBLISHED_CODES[status]
    phrase = HTTP_STATUS_CODES.get(status or 0)
    return re.sub(r"[^a-z0-9]+", "_", phrase.lower()).strip("_") if phrase else "http_error"


def wants_json() -> bool:
    return request.path.startswith("/api/") or request.accept_mimetypes.best == "application/json"


def raise_for_json(error: ApiError) -> None:
    """A console form refused: a client that asks for JSON gets the JSON error, like
    every other refusal (REV-5); a browser gets the form's page with the error."""
    if wants_json():
        raise error


def render_error(error: ApiError):
    """Answer an `ApiError` the way the caller expects."""
    if wants_json():
        response = jsonify(error.as_dict())
        if error.status == 401 and request.path.startswith("/api/"):
            response.headers["WWW-Authenticate"] = "Bearer"
        return response, error.status
    template = "errors/_fragment.html" if is_htmx() else "errors/page.html"
    return render_template(template, error=error), error.status


def register_error_handlers(app) -> None:
    @app.errorhandler(ApiError)
    def _api_error(error: ApiError):
        return render_error(error)

    @app.errorhandler(CSRFError)
    def _csrf_error(error: CSRFError):
        return render_error(
            ApiError(
                400, "csrf_invalid", "The form expired or was not sent from the console. Reload the page and try again."
            )
        )

    @app.errorhandler(429)
    def _too_many(error: HTTPException):
        wait = _minutes_until_reset()
        when = f"Try again in {wait} minute{'s' if wait != 1 else ''}." if wait else "Wait a few minutes and try again."
        if request.path.startswith("/login"):  # the password and the second-factor steps
            return render_error(ApiError(429, "login_rate_limited", f"Too many sign-in attempts. {when}"))
        return render_error(ApiError(429, "too_many_requests", f"Too many requests. {when}"))

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException):
        code = http_error_code(error.code)
        return render_error(ApiError(error.code or 500, code, error.description or code))

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        return render_error(ApiError(500, "internal_error", "Something went wrong on our side. It was logged."))


def _minutes_until_reset() -> int | None:
    """Whole minutes until the rate limit this request ran into resets (what its
    Retry-After header says, rounded up), or None when it is not known."""
    from app.extensions import limiter

    limit = limiter.current_limit
    if limit is None:
        return None
    return max(1, math.ceil(int(limit.reset_at - time.time()) / 60))  # the header truncates the seconds
