"""Labels in templates (SPEC REV-3): ``label(kind, code)`` gives the words, read from
the installation's configuration once per request."""

from __future__ import annotations

from flask import Flask, has_request_context, request
from flask_login import current_user

from app.domain.labels import label_for


def _configured() -> dict[tuple[str, str], str]:
    if not has_request_context():
        return {}
    cache = request.environ  # per request (tests share one app context, so not g)
    if "console.code_labels" not in cache:
        from app.services.admin.label_settings import configured_labels

        signed_in = current_user and current_user.is_authenticated
        cache["console.code_labels"] = configured_labels(current_user.installation_id) if signed_in else {}
    return cache["console.code_labels"]


def label(kind: str, code: str | None) -> str:
    """The label of `code` for the signed-in operator's installation."""
    return label_for(_configured(), kind, code)


def register_labels(app: Flask) -> None:
    """Make ``label(kind, code)`` available to every template."""
    app.jinja_env.globals["label"] = label
