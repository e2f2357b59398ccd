"""When a proposal may be sent: its `not_before` (SPEC TEMP-4), as pure functions.

Apart from `temporary` so that the identity rules, which put `not_before` in the
digest, and the temporary-action rules, which build reversals, import it one way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from app.domain.clock import iso, parse_iso
from app.domain.errors import ActionError

NOT_BEFORE_INVALID = "action_not_before_invalid"


def scheduled_time(config: dict[str, Any], mapped: dict[str, Any], run_created_at: datetime) -> Any:
    """A workflow proposal's requested `not_before` (TEMP-4): the input mapping's
    ``not_before`` (ISO-8601 UTC), else the node config's ``delay_seconds`` after its
    run started (fixed by the run, so preparing again gives the same digest).

    Raises:
        ActionError: ``action_not_before_invalid`` for a delay that is not a positive integer.
    """
    if mapped.get("not_before") is not None:
        return mapped["not_before"]
    delay = config.get("delay_seconds")
    if delay is None:
        return None
    if isinstance(delay, bool) or not isinstance(delay, int) or delay <= 0:
        raise ActionError(NOT_BEFORE_INVALID)
    return iso(run_created_at + timedelta(seconds=delay))


def check_not_before(value: Any, now: datetime, authorized_until: datetime) -> datetime | None:
    """A proposal's `not_before` (TEMP-4): ISO-8601 UTC, before its authorization ends.

    Args:
        value: None (send as soon as authorized) or an ISO-8601 UTC string.
        now: the time the proposal is made (a time already past is kept as given, so
            preparing the same operation again gives the same digest, PREP-7).
        authorized_until: its expiry; a not_before at or after it could never be sent.

    Raises:
        ActionError: ``action_not_before_invalid``.
    """
    if value is None:
        return None
    try:
        when = parse_iso(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when >= authorized_until:
        raise ActionError(NOT_BEFORE_INVALID)
    return when
