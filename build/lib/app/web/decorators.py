"""Permission decorators. Each answers pages, htmx requests and the JSON API in
their own way: a redirect to login, an ``HX-Redirect``, or a JSON error."""

from __future__ import annotations

from functools import wraps

from flask import g, redirect, request, url_for
from flask_login import current_user

from app.domain.errors import ApiError


def is_htmx() -> bool:
    """A non-boosted htmx request, which expects a fragment."""
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-Boosted") != "true"


def login_redirect():
    """Where an unauthenticated console request goes (htmx: the whole page, 401)."""
    target = url_for("auth.login", next=request.full_path.rstrip("?") if request.method == "GET" else None)
    if request.accept_mimetypes.best == "application/json":  # a JSON client gets a JSON refusal (REV-5)
        raise ApiError(401, "unauthorized", "Sign in to the console first.")
    if is_htmx():
        return "", 401, {"HX-Redirect": target}
    return redirect(target)


def role_required(*roles: str):
    """Require a signed-in operator holding any of `roles` (none: any operator).

    Unauthenticated: redirect to login (htmx: 401 + HX-Redirect). Wrong role: 403.
    """

    def decorator(view):
        @wraps(view)
        def wrapper(*args, **kwargs):
            if not current_user.is_authenticated:
                return login_redirect()
            if roles and not current_user.has_role(*roles):
                raise ApiError(403, "forbidden", "Your role does not allow this.")
            return view(*args, **kwargs)

        wrapper.required_roles = frozenset(roles)  # the navigation asks (REV-5)
        return wrapper

    return decorator


def may_open(endpoint: str) -> bool:
    """Whether the signed-in operator's roles open `endpoint` (its `role_required`)."""
    from flask import current_app

    view = current_app.view_functions.get(endpoint)
    roles = getattr(view, "required_roles", None)
    if roles is None or not current_user.is_authenticated:
        return False
    return not roles or current_user.has_role(*roles)


def integration_required(view):
    """Require an integration's bearer token (``Authorization: Bearer sct_...``)."""

    @wraps(view)
    def wrapper(*args, **kwargs):
        from app.services.admin.integrations import authenticate_caller

        header = request.headers.get("Authorization", "")
        token = header[7:].strip() if header.lower().startswith("bearer ") else None
        caller = authenticate_caller(token)
        if caller is None:
            raise ApiError(401, "unauthorized", "A valid integration bearer token is required.")
        g.integration = caller.integration
        g.integration_caller = caller  # the token too: FOUR-8
        return view(*args, **kwargs)

    return wrapper
