"""Labels in templates (SPEC REV-3): ``label(kind, code)`` gives the words, read from
the installation's configuration once per request."""

from __future__ import annotations

from flask import Flask, has_request_context, request
from flask_login import current_user

from app.domain.labels import code_for, label_choices, label_for


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


def choices(kind: str) -> list[tuple[str, str]]:
    """(code, label) pairs of `kind` for a <select>, in the installation's words (QUEUE-1)."""
    return label_choices(_configured(), kind)


def code_of(kind: str, text: str) -> str:
    """The code meant by `text`, a code or its label in any case (QUEUE-1); else `text`."""
    return code_for(_configured(), kind, text) if text else text


def register_labels(app: Flask) -> None:
    """Make ``label(kind, code)`` and ``label_choices(kind)`` available to every template."""
    app.jinja_env.globals["label"] = label
    app.jinja_env.globals["label_choices"] = choices
