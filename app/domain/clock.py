"""Time in one place: aware UTC datetimes and their ISO-8601 text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


_shift = timedelta(0)  # the tests' injected clock (`shift_clock`); zero in production


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC) + _shift


def shift_clock(by: timedelta | None) -> None:
    """Move this process's `utcnow` forward by `by` from the real time (None: back to
    the real time). The tests' injected clock; nothing in the product calls it."""
    global _shift
    _shift = by or timedelta(0)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds and ``Z`` (the form digests and APIs use)."""
    if value is None:
        return None
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if value.year < 1000:  # isoformat pads the year to four digits, strftime does not
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    return value.isoformat(timespec="milliseconds")[:-6] + "Z"  # "+00:00" → "Z"; C, not strftime


def clock_utc(value: datetime) -> str:
    """A time of day for plain-text messages (flashes, refusals) that cannot carry a
    localised ``<time>`` element: ``"11:34 UTC"`` (QUEUE-6's one rule for times).

    Args:
        value: an aware datetime (any zone; shown in UTC) or a naive one read as UTC.
    """
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return f"{value:%H:%M} UTC"


def parse_iso(text: str) -> datetime:
    """Parse ISO-8601 text (``Z`` or offset) to an aware UTC datetime.

    Raises:
        ValueError: when the text is not ISO-8601.
    """
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def seconds_from_now(seconds: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) + timedelta(seconds=seconds)
