"""Checks shared by the admin services: names, slugs, numbers and JSON text typed
into the console's admin forms, and the audit keys of admin changes.

Every check raises `ApiError` with the caller's error code and the form field at
fault, so a refused request names what to fix and changes no row.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import rfc8785

from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.models import new_id

SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$")
INTEGER_PATTERN = re.compile(r"^[+-]?\d{1,15}$")
NUMBER_PATTERN = re.compile(r"^[+-]?(?:\d{1,15}(?:\.\d{0,6})?|\.\d{1,6})$")


class InvalidInput(ApiError):
    """An `ApiError` that lists every problem found (e.g. each error of a graph).

    Args:
        problems: one sentence per problem, shown as a list under the message.
    """

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, problems: list[str] | tuple = ()
    ) -> None:
        super().__init__(status, code, message, field)
        self.problems = list(problems)


def plausible_id(value: Any) -> bool:
    """Whether `value` can be a row id: short text without NUL (which PostgreSQL refuses).

    Look-ups of anything else answer "not found" instead of a database error.
    """
    return isinstance(value, str) and 0 < len(value) <= 200 and "\x00" not in value


def has_control_characters(text: str) -> bool:
    """Whether text holds control characters (NUL, new lines, DEL, ...)."""
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)


def clean_name(value: Any, field: str = "name") -> str:
    """A display name: trimmed, 1..200 characters.

    Raises:
        ApiError: 400 ``name_invalid``.
    """
    name = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(name) <= 200 or has_control_characters(name):
        raise ApiError(400, "name_invalid", "Give a name of 1 to 200 characters on one line.", field)
    return name


def clean_slug(value: Any, field: str = "slug") -> str:
    """A slug: lowercase letters, digits and inner hyphens, 1..100 characters.

    Raises:
        ApiError: 400 ``slug_invalid``.
    """
    slug = value.strip() if isinstance(value, str) else ""
    if not SLUG_PATTERN.match(slug):
        raise ApiError(
            400,
            "slug_invalid",
            "A slug has 1 to 100 lowercase letters, digits and hyphens, and starts and ends with a letter or digit.",
            field,
        )
    return slug


def parse_int(value: Any, *, code: str, field: str, minimum: int, maximum: int, message: str) -> int:
    """An integer in minimum..maximum, given as an int or as decimal text.

    Raises:
        ApiError: 400 `code` with `message`.
    """
    if isinstance(value, bool):
        raise ApiError(400, code, message, field)
    if isinstance(value, str):
        text = value.strip()
        if not INTEGER_PATTERN.match(text):
            raise ApiError(400, code, message, field)
        value = int(text)
    if not isinstance(value, int) or not minimum <= value <= maximum:
        raise ApiError(400, code, message, field)
    return value


def parse_number(value: Any, *, code: str, field: str, minimum: float, maximum: float, message: str) -> float:
    """A finite number in minimum..maximum (at most 6 decimals when given as text).

    Raises:
        ApiError: 400 `code` with `message`.
    """
    if isinstance(value, bool):
        raise ApiError(400, code, message, field)
    if isinstance(value, str):
        text = value.strip()
        if not NUMBER_PATTERN.match(text):
            raise ApiError(400, code, message, field)
        value = float(text)
    if not isinstance(value, int | float) or not math.isfinite(value) or not minimum <= value <= maximum:
        raise ApiError(400, code, message, field)
    return float(value)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def parse_json_text(text: Any, *, code: str, field: str, label: str, max_chars: int) -> tuple[Any, str]:
    """Parse JSON typed into a form.

    Args:
        text: the JSON text (at most `max_chars` characters).
        label: what the text is, for messages (e.g. "The input schema").

    Returns:
        The value and its canonical JSON (RFC 8785), which is what gets stored.

    Raises:
        ApiError: 400 `code` when the text is missing, too long, not JSON, or holds
            values canonical JSON cannot (NaN, integers beyond 2^53).
    """
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, code, f"{label} is required (JSON text).", field)
    if len(text) > max_chars:
        raise ApiError(400, code, f"{label} is longer than {max_chars:,} characters.", field)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise ApiError(
            400, code, f"{label} is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno}).", field
        ) from error
    except (ValueError, RecursionError) as error:
        raise ApiError(400, code, f"{label} is not valid JSON: {error}.", field) from error
    try:
        canonical = canonical_json(value)
    except (rfc8785.CanonicalizationError, RecursionError) as error:
        raise ApiError(400, code, f"{label} holds a value JSON cannot keep exactly: {error}.", field) from error
    return value, canonical


def change_key(kind: str, target_id: str) -> str:
    """A fresh audit idempotency key for one admin change of `target_id`."""
    return f"admin:{kind}:{target_id}:{new_id('chg')}"


def lock_owned(session, model, row_id: Any, installation_id: str, code: str, noun: str):
    """The installation's row, locked for the new version about to be written under it.

    Raises:
        ApiError: 404 `code` for a missing id or another installation's.
    """
    from sqlalchemy import select

    row = (
        session.scalar(
            select(model).where(model.id == row_id, model.installation_id == installation_id).with_for_update()
        )
        if plausible_id(row_id)
        else None
    )
    if row is None:
        raise ApiError(404, code, f"No such {noun}.")
    return row


def owned(session, model, row_id: Any, installation_id: str, code: str, noun: str):
    """The installation's row, read without a lock (what a change page compares with).

    Raises:
        ApiError: 404 `code` for a missing id or another installation's.
    """
    row = session.get(model, row_id) if plausible_id(row_id) else None
    if row is None or row.installation_id != installation_id:
        raise ApiError(404, code, f"No such {noun}.")
    return row


def latest_version(session, version_model, parent_column, parent_id: str):
    """The newest version row under a parent (None when it has none)."""
    from sqlalchemy import select

    return session.scalar(
        select(version_model).where(parent_column == parent_id).order_by(version_model.version.desc()).limit(1)
    )


def add_with_unique_slug(session, row, noun: str) -> None:
    """Add a new row whose slug must be unique in its installation (also under a race).

    Raises:
        ApiError: 409 ``slug_taken``.
    """
    from sqlalchemy import select
    from sqlalchemy.exc import IntegrityError

    model = type(row)
    taken = ApiError(409, "slug_taken", f"{noun} with the slug {row.slug!r} exists.", "slug")
    if session.scalar(select(model.id).where(model.installation_id == row.installation_id, model.slug == row.slug)):
        raise taken
    session.add(row)
    try:
        session.flush()
    except IntegrityError as error:  # created a moment ago by someone else
        raise taken from error


def add_version(session, version):
    """Add a new version row (its number unique under its parent) and flush it.

    Args:
        session: the unit of work's session.
        version: a new workflow, component or connection version.

    Returns:
        The version, flushed (its id usable).

    Raises:
        ApiError: 409 ``version_conflict`` when another version with the same number
            was saved at the same moment.
    """
    from sqlalchemy.exc import IntegrityError

    session.add(version)
    try:
        session.flush()
    except IntegrityError as error:
        raise ApiError(409, "version_conflict", "Another version was saved at the same moment. Try again.") from error
    return version
