"""A filter over open reports, the second way to select a bulk action's subjects (SPEC BULK-1).

The moderator names one or more criteria: the category, the queue, the reported target
or its author, a window of receipt times, the reporting integration. The filter is
checked here and kept in a canonical form, so the dry run can store it and the
approval resolve it again (BULK-4). Pure: no Flask, no database; the queue and the
integration are resolved by the service (``app.services.bulk.sources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from ..clock import iso
from ..errors import ApiError
from .subjects import reference_error

MAX_VALUE = 500  # characters of one criterion
TEXT_FIELDS = ("category", "queue", "integration")
REFERENCE_FIELDS = ("target_reference", "author_reference")
TIME_FIELDS = ("received_from", "received_to")
FILTER_INVALID = "bulk_filter_invalid"
FILTER_EMPTY = "bulk_filter_empty"


@dataclass(frozen=True)
class ReportFilter:
    """Which open reports a bulk action selects: every given criterion must hold.

    Attributes:
        category: the report's category, equal.
        queue: a queue's id or slug.
        target_reference: the report's first target.
        author_reference: the author named by the first target's evidence.
        received_from: reports received at or after this time (aware UTC, to the millisecond).
        received_to: reports received before this time (aware UTC, to the millisecond).
        integration: the reporting integration's id or slug.
    """

    category: str | None = None
    queue: str | None = None
    target_reference: str | None = None
    author_reference: str | None = None
    received_from: datetime | None = None
    received_to: datetime | None = None
    integration: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The criteria given, as JSON: times as ISO-8601 UTC text (``...T08:15:00.000Z``);
        `parse_report_filter` reads it back to an equal filter."""
        values = {field.name: getattr(self, field.name) for field in fields(self)}
        given = {name: value for name, value in values.items() if value is not None}
        return {name: iso(value) if isinstance(value, datetime) else value for name, value in given.items()}


FIELDS = tuple(field.name for field in fields(ReportFilter))


def parse_report_filter(values: Mapping[str, Any]) -> ReportFilter:
    """Check a report filter from a form or a JSON body (SPEC BULK-1).

    Args:
        values: ``{category?, queue?, target_reference?, author_reference?,
            received_from?, received_to?, integration?}``, each a string (times
            ISO-8601 with a time zone, e.g. ``2026-12-01T08:00:00Z``; an aware datetime
            is taken too); a missing, null or blank value is no criterion.

    Returns:
        The filter, text trimmed, times in UTC cut to the millisecond.

    Raises:
        ApiError: 400 ``bulk_filter_invalid`` naming the field (an unknown field, a
            value that is not text, over 500 characters, a reference the intake would
            refuse, a time without a zone or not a time, a window that ends before it
            starts); 400 ``bulk_filter_empty`` when no criterion is given.
    """
    if not isinstance(values, Mapping):
        raise ApiError(400, FILTER_INVALID, "The report filter must be an object of criteria.")
    unknown = sorted(str(key) for key in values if key not in FIELDS)
    if unknown:
        raise ApiError(
            400, FILTER_INVALID, f"Unknown filter field {unknown[0][:50]!r}; the fields are {', '.join(FIELDS)}.",
            unknown[0][:50],
        )
    parsed = {name: _value(name, values.get(name)) for name in FIELDS}
    for name in REFERENCE_FIELDS:
        if parsed[name] is not None:
            check_filter_reference(parsed[name], name)
    start, end = parsed["received_from"], parsed["received_to"]
    if start is not None and end is not None and start > end:
        raise ApiError(400, FILTER_INVALID, "The received window ends before it starts.", "received_to")
    if all(value is None for value in parsed.values()):
        raise ApiError(
            400, FILTER_EMPTY,
            "Give at least one criterion: category, queue, target or author reference, received window or integration.",
        )
    return ReportFilter(**parsed)


def check_filter_reference(reference: str, field: str) -> None:
    """Refuse a reference criterion the intake would refuse (SPEC BULK-1, FOUR-10).

    Args:
        reference: the trimmed reference (``user:42``).
        field: the criterion's name, for the error.

    Raises:
        ApiError: 400 ``bulk_filter_invalid``, saying what is wrong with it.
    """
    problem = reference_error(reference)
    if problem:
        raise ApiError(400, FILTER_INVALID, problem[1], field)


def _value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name in TIME_FIELDS and isinstance(value, datetime):
        return _aware(name, value)
    if not isinstance(value, str):
        raise ApiError(400, FILTER_INVALID, f"{name} must be text.", name)
    if len(value) > MAX_VALUE:
        raise ApiError(400, FILTER_INVALID, f"{name} must be at most {MAX_VALUE} characters.", name)
    text = value.strip()
    if not text:
        return None
    return _time(name, text) if name in TIME_FIELDS else text


def _time(name: str, text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as error:
        raise ApiError(
            400, FILTER_INVALID, f"{name} must be a date and time in ISO-8601, e.g. 2026-12-01T08:00:00Z.", name
        ) from error
    return _aware(name, value)


def _aware(name: str, value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ApiError(
            400, FILTER_INVALID,
            f"{name} must be a date and time with a time zone, e.g. 2026-12-01T08:00:00Z (UTC) or ...+01:00.", name,
        )
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)
