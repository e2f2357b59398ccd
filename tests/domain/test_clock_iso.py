"""`iso` is the one spelling of a time in digests and APIs (ID-2): ISO-8601 UTC with
milliseconds and ``Z``. It is written with `datetime.isoformat` (C) for speed; these
tests hold it to the strftime spelling it replaced, byte for byte."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from app.domain.clock import iso


def spelled_by_strftime(value: datetime) -> str:
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)), ZONES)
def test_iso_spells_every_time_as_before(moment, zone):
    """ID-2: naive (read as UTC) and aware times in any zone, microseconds truncated to
    milliseconds, years below 1000 included."""
    value = moment if zone is None else moment.replace(tzinfo=zone)
    assert iso(value) == spelled_by_strftime(value)


def test_iso_examples():
    """ID-2: the spelling by example."""
    assert iso(datetime(2026, 12, 4, 3, 5, 7, 999_999, tzinfo=UTC)) == "2026-12-04T03:05:07.999Z"
    assert iso(datetime(2026, 12, 4, 3, 5, 7)) == "2026-12-04T03:05:07.000Z"
    assert iso(None) is None


def test_time_tag_shows_the_time_as_before():
    """QUEUE-6: the page's <time> shows date and time in UTC, also for a year below
    1000 (a platform's mapped time can be any ISO text; found by the break-it pass)."""
    from app.web.formatting import time_tag

    assert ">2026-12-04 03:05:07 UTC</time>" in str(time_tag(datetime(2026, 12, 4, 3, 5, 7, 999_999, tzinfo=UTC)))
    assert ">999-01-01 00:00:00 UTC</time>" in str(time_tag(datetime(999, 1, 1, tzinfo=UTC)))
