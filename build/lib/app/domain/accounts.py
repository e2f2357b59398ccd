"""Accounts by invitation (FOUR-6) and e-mail addresses that cannot pass for another
(FOUR-10), as pure rules.

An operator's e-mail address is how people recognise an account in lists, in change
summaries and in the audit trail. ``аdmin2@example.com`` with a Cyrillic ``а`` looks
exactly like ``admin2@example.com``; so does an address with a zero-width or
bidirectional character in it. Such an address is refused, not flagged: an account is
looked at by many people for years (every list and audit row shows its address), a
flag is seen once by one approver, and no real mailbox of a Trust & Safety team
needs a non-ASCII address to sign in to a console.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from .errors import ApiError

INVITATION_LIFETIME = timedelta(hours=72)
MAX_PUBLIC_URL_LENGTH = 500
# Printable ASCII without space, backslash, quotes or angle brackets: one plain address.
_PLAIN_URL = re.compile(r"[!#-&(-;=?-\[\]-~]+")


def email_lookalike_problem(email: str) -> str | None:
    """Why an operator e-mail address is refused as a possible lookalike, or None (FOUR-10).

    Args:
        email: the address as typed (before trimming).

    Returns:
        A sentence when it holds any character outside ASCII (letters of other
        scripts, zero-width, bidirectional or other invisible characters), else None.
    """
    if email.isascii():
        return None
    return (
        "Operator e-mail addresses must be plain ASCII: letters of other scripts and invisible "
        "characters can make one address look like another."
    )


def invitation_token_hash(token: str) -> str:
    """What is stored of an invitation token: ``sha256:`` and its hex digest (FOUR-6)."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def invitation_problem(
    *, expires_at: datetime, used_at: datetime | None, revoked_at: datetime | None, now: datetime
) -> tuple[int, str, str] | None:
    """Why an invitation can no longer be used, or None while it can (FOUR-6).

    Args:
        expires_at: when it expires (aware datetime); used_at, revoked_at: when it
            was used or replaced by a newer one (None if not); now: the time to judge at.

    Returns:
        (HTTP status 410, error code, message) or None.
    """
    if used_at is not None:
        return 410, "invitation_used", "This invitation was used already. Sign in with the password you set."
    if revoked_at is not None:
        return 410, "invitation_replaced", "A newer invitation replaced this one. Use the link of the newest one."
    if now >= expires_at:
        return 410, "invitation_expired", "This invitation has expired. Ask an admin to send you a new one."
    return None


def check_new_password(password: Any) -> str:
    """The project's password rule: 12 to 500 characters (an invitee sets their own, FOUR-6).

    Raises:
        ApiError: 400 ``password_invalid``.
    """
    if not isinstance(password, str) or not 12 <= len(password) <= 500:
        raise ApiError(400, "password_invalid", "Passwords need 12 to 500 characters.", "password")
    return password


def check_public_url(value: str) -> str:
    """``PUBLIC_URL``, the only base of an invitation link that is mailed (FOUR-6).

    A mailed link must not come from the request (its Host or X-Forwarded-Host header is
    whatever the sender chose), so it is built from this setting alone.

    Args:
        value: the console's address as users reach it, e.g. ``https://console.example.org``
            (a path prefix is allowed).

    Returns:
        The address without its final slash.

    Raises:
        ValueError: naming ``PUBLIC_URL``, unless it is an absolute ``http``/``https`` URL
            with a host and a valid port, no userinfo, query or fragment, in printable
            ASCII without spaces or backslashes, at most 500 characters.
    """
    problem = "PUBLIC_URL must be the console's absolute http(s) address, e.g. https://console.example.org"
    if not isinstance(value, str) or len(value) > MAX_PUBLIC_URL_LENGTH or not _PLAIN_URL.fullmatch(value):
        raise ValueError(problem)
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 (raises ValueError when the port is not a number 0..65535)
    except ValueError:
        raise ValueError(f"{problem} (its port is not valid)") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(problem)
    if "@" in parts.netloc:
        raise ValueError(f"{problem} (no user name or password in it)")
    if "?" in value or "#" in value:
        raise ValueError(f"{problem} (no query or fragment)")
    return value.rstrip("/")
