"""Keyset pagination for the console's lists: a cursor names the last row shown by
(created_at, id), so the next page starts after it whatever was inserted since."""

from __future__ import annotations

import base64
from datetime import datetime

from app.domain.clock import iso, parse_iso


def encode_cursor(created_at: datetime, id: str) -> str:
    """The cursor after a row: URL-safe base64 of ``<ISO time>|<id>``, unpadded."""
    return base64.urlsafe_b64encode(f"{iso(created_at)}|{id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """Decode a keyset cursor; a malformed one reads as the first page (None)."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, id = text.split("|", 1)
        if "\x00" in id or len(id) > 700:
            return None
        return parse_iso(stamp), id
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None
