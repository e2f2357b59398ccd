"""Retry delay for a failed delivery attempt (SPEC DLV-6)."""

from __future__ import annotations

MIN_DELAY_SECONDS = 1
MAX_DELAY_SECONDS = 21_600


def retry_delay(base_delay_seconds: float, attempt_in_cycle: int) -> float:
    """Seconds to wait before the next attempt.

    ``base × 2^min(attempt_in_cycle − 1, 7)`` clamped to 1..21,600 s (DLV-6). The base
    is the error's own delay: a platform's ``Retry-After`` or a receipt's
    ``retry_after_seconds`` when it gave one.

    Args:
        base_delay_seconds: the failure's base delay in seconds.
        attempt_in_cycle: 1 for the first attempt of the delivery cycle.
    """
    exponent = max(0, min(attempt_in_cycle - 1, 7))
    delay = base_delay_seconds * (2**exponent)
    return max(MIN_DELAY_SECONDS, min(MAX_DELAY_SECONDS, delay))
