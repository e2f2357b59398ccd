"""A queue's time-to-decide target as people write it (SPEC QUEUE-4): "90m", "4h",
"2d" or a number of minutes; empty for none."""

from __future__ import annotations

import re

from .errors import ApiError

TARGET_MIN_SECONDS = 60
TARGET_MAX_SECONDS = 30 * 86400
UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400}
PATTERN = re.compile(r"^(\d{1,6})\s*(m|min|h|d)?$")


def parse_target(text: str | None) -> int | None:
    """Seconds for a target written as ``90m``, ``4h``, ``2d`` or ``45`` (minutes).

    Returns:
        The seconds, or None for an empty text (the queue has no target).

    Raises:
        ApiError: 400 ``queue_target_invalid`` for another form or outside one minute
            .. 30 days.
    """
    value = (text or "").strip().lower()
    if not value:
        return None
    match = PATTERN.match(value)
    if not match:
        raise ApiError(400, "queue_target_invalid",
                       "Write the time to decide as minutes or hours, e.g. 90m, 4h or 2d; leave it empty for none.",
                       "target")
    seconds = int(match.group(1)) * UNITS[match.group(2) or "m"]
    if not TARGET_MIN_SECONDS <= seconds <= TARGET_MAX_SECONDS:
        raise ApiError(400, "queue_target_invalid", "A time to decide is from one minute to 30 days.", "target")
    return seconds


def target_words(seconds: int | None) -> str:
    """A target in words: "4 h", "90 min", "2 days", or "no target"."""
    if seconds is None:
        return "no target"
    if seconds % 86400 == 0:
        days = seconds // 86400
        return f"{days} day{'s' if days != 1 else ''}"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"
