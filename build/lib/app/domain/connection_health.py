"""A connection's health: circuit breaker, pause and disabling (SPEC CONN-1..3).

Pure decisions over plain values. `Health` is the connection's row as read; every
function returns what to write (a `HealthChange`: the new values and the transition,
if any) or what a delivery must do now (an `Admission`). The service writes a change
with one UPDATE guarded on the row's ``version`` as read, so two workers deciding on
the same row never both win: the loser reads again and decides again.

The breaker (CONN-1): ``closed`` → ``open`` after `failure_threshold` consecutive
retryable failures; while open nothing is sent and due deliveries wait for the probe
time; at the probe time exactly one delivery takes the probe (``half_open``); its
success closes the breaker, its failure opens it again with the delay doubled (up to
`max_probe_seconds`). A probe whose worker died is taken again once its lease ends.

The pause (CONN-2): a 429 holds every delivery of the connection until its
``Retry-After``. (The rate limit of CONN-2 has no pure twin here: its one
implementation is the Redis script of `app.services.lifecycle.rate_limit`.) Disabling (CONN-3): a 410, or failures without a success for longer
than `failure_window_seconds`, disable the endpoint until an admin re-enables it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"
STATES = (CLOSED, OPEN, HALF_OPEN)

# Why a delivery waits (its proposal's last_error_code while it waits; no attempt used).
WAIT_OPEN = "connection_circuit_open"
WAIT_PROBE = "connection_probe_in_flight"
WAIT_PAUSED = "connection_paused"
WAIT_DISABLED = "connection_disabled"
WAIT_RATE_LIMITED = "connection_rate_limited"
WAIT_CODES = frozenset({WAIT_OPEN, WAIT_PROBE, WAIT_PAUSED, WAIT_DISABLED, WAIT_RATE_LIMITED})

GONE = "gone"  # disabled because the endpoint answered 410
FAILING = "failing"  # disabled because it kept failing longer than the window
DISABLED_RECHECK_SECONDS = 3600  # a disabled connection's deliveries look again hourly (re-enabling releases them)
MAX_PAUSE_SECONDS = 3600  # a Retry-After longer than this is read as this


@dataclass(frozen=True)
class Settings:
    """A connection version's health settings.

    Attributes:
        failure_threshold: consecutive retryable failures that open the breaker (≥ 1).
        first_probe_seconds: seconds from opening to the first probe.
        max_probe_seconds: the probe delay doubles on each failed probe up to this.
        failure_window_seconds: failing this long without a success disables the endpoint.
        rate_limit_per_second: requests per second across every worker, or None for none.
    """

    failure_threshold: int = 5
    first_probe_seconds: float = 30
    max_probe_seconds: float = 600
    failure_window_seconds: float = 86_400
    rate_limit_per_second: float | None = None


@dataclass(frozen=True)
class Health:
    """A connection's health row, as read (field names are columns)."""

    state: str = CLOSED
    consecutive_failures: int = 0
    failing_since: datetime | None = None
    opened_at: datetime | None = None
    probe_delay_seconds: float | None = None
    next_probe_at: datetime | None = None
    probe_lease_expires_at: datetime | None = None
    paused_until: datetime | None = None
    disabled_at: datetime | None = None
    disabled_reason: str | None = None
    version: int = 0

    @property
    def disabled(self) -> bool:
        return self.disabled_at is not None


HEALTH_FIELDS = tuple(Health.__dataclass_fields__)  # the ``connection_health`` columns a `Health` holds


@dataclass(frozen=True)
class HealthChange:
    """Columns to write and the transition they make (None when the state stays).

    ``transition`` is what the audit row and the metric call it: ``opened``,
    ``probe_started``, ``closed``, ``reopened``, ``paused``, ``disabled``,
    ``re_enabled``.
    """

    values: dict[str, Any]
    transition: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def applied_to(self, health: Health) -> Health:
        """The row after the write."""
        return replace(health, **self.values, version=health.version + 1)


@dataclass(frozen=True)
class Admission:
    """What a claimed delivery does now.

    Attributes:
        send: True when the request may leave.
        probe: True when this request is the half-open probe.
        wait_code: why it waits (one of `WAIT_CODES`) when it may not send.
        wait_until: until when it waits.
        change: the write that goes with it (taking the probe), or None.
    """

    send: bool
    probe: bool = False
    wait_code: str | None = None
    wait_until: datetime | None = None
    change: HealthChange | None = None


def admit(h: Health, now: datetime, probe_lease_seconds: float) -> Admission:
    """Whether a claimed delivery may send now (CONN-1, CONN-2, CONN-3).

    Disabled: wait (re-enabling releases it). Paused by a 429: wait until the pause
    ends. Closed: send. Open before its probe time: wait until then. Open at or
    after its probe time, or half-open with an expired probe lease: take the probe
    (one guarded write, so one worker wins). Half-open with a probe in flight: wait
    until the probe's lease ends (a success releases waiting deliveries sooner).

    Args:
        h: the health row as read.
        now: the current time (aware UTC).
        probe_lease_seconds: how long a probe may take before another may be sent
            (the request's timeout and a margin), in seconds.
    """
    if h.disabled:
        return Admission(False, wait_code=WAIT_DISABLED, wait_until=now + timedelta(seconds=DISABLED_RECHECK_SECONDS))
    if h.paused_until is not None and h.paused_until > now:
        return Admission(False, wait_code=WAIT_PAUSED, wait_until=h.paused_until)
    if h.state == CLOSED:
        return Admission(True)
    if h.state == OPEN and h.next_probe_at is not None and h.next_probe_at > now:
        return Admission(False, wait_code=WAIT_OPEN, wait_until=h.next_probe_at)
    if h.state == HALF_OPEN and h.probe_lease_expires_at is not None and h.probe_lease_expires_at > now:
        return Admission(False, wait_code=WAIT_PROBE, wait_until=h.probe_lease_expires_at)
    lease = now + timedelta(seconds=probe_lease_seconds)
    change = HealthChange({"state": HALF_OPEN, "probe_lease_expires_at": lease}, "probe_started")
    return Admission(True, probe=True, change=change)


def holds_back(h: Health, now: datetime) -> bool:
    """Whether the connection holds every delivery back now: disabled, paused by a
    429, or its breaker not closed (CONN-1..3). Operations then counts each waiting
    delivery of it as held back, whichever error it last recorded."""
    return h.disabled or (h.paused_until is not None and h.paused_until > now) or h.state != CLOSED


def counts_as_failure(retryable: bool, status: int | None, code: str) -> bool:
    """Whether an attempt's failure counts toward opening the breaker (CONN-1).

    Retryable failures of the platform or the way to it count (timeouts, refused or
    broken connections, 408, 5xx); a 429 does not (it pauses instead, CONN-2), nor do
    failures the platform cannot cure by recovering (4xx, refused destinations).
    """
    return retryable and status != 429 and code != "platform_rate_limited"


def after_failure(h: Health, settings: Settings, now: datetime, was_probe: bool) -> HealthChange:
    """A counted failure (CONN-1, CONN-3).

    The streak grows; at `failure_threshold` a closed breaker opens with the first
    probe delay; a failed probe opens it again with the delay doubled, up to
    `max_probe_seconds`. Failing for longer than the window disables the endpoint.

    Args:
        was_probe: this attempt was the half-open probe.
    """
    failing_since = h.failing_since or now
    values: dict[str, Any] = {"consecutive_failures": h.consecutive_failures + 1, "failing_since": failing_since}
    transition = None
    details: dict[str, Any] = {"consecutive_failures": values["consecutive_failures"]}
    if h.state == HALF_OPEN and was_probe:
        delay = next_probe_delay(h.probe_delay_seconds, settings)
        values |= _open_values(now, delay)
        transition = "reopened"
    elif h.state == CLOSED and values["consecutive_failures"] >= settings.failure_threshold:
        values |= _open_values(now, settings.first_probe_seconds)
        values["opened_at"] = now
        transition = "opened"
    if transition:
        details["next_probe_in_seconds"] = values["probe_delay_seconds"]
    if not h.disabled and (now - failing_since).total_seconds() >= settings.failure_window_seconds:
        values |= {"disabled_at": now, "disabled_reason": FAILING}
        transition = "disabled"
        details["failing_since"] = failing_since.isoformat()
    return HealthChange(values, transition, details)


def _open_values(now: datetime, delay: float) -> dict[str, Any]:
    return {
        "state": OPEN,
        "probe_delay_seconds": delay,
        "next_probe_at": now + timedelta(seconds=delay),
        "probe_lease_expires_at": None,
    }


def next_probe_delay(current: float | None, settings: Settings) -> float:
    """The delay after a failed probe: double the current one, at most `max_probe_seconds`."""
    base = current if current is not None else settings.first_probe_seconds
    return min(base * 2, settings.max_probe_seconds)


def after_success(h: Health) -> HealthChange | None:
    """The platform answered (CONN-1): the streak ends and the breaker closes.

    Returns None when there is nothing to write (closed, no failures): the hot path
    of a healthy connection writes nothing.
    """
    if h.state == CLOSED and h.consecutive_failures == 0 and h.failing_since is None:
        return None
    values = {
        "state": CLOSED,
        "consecutive_failures": 0,
        "failing_since": None,
        "opened_at": None,
        "probe_delay_seconds": None,
        "next_probe_at": None,
        "probe_lease_expires_at": None,
    }
    return HealthChange(values, "closed" if h.state != CLOSED else None)


def pause_seconds(retry_after_seconds: float) -> float:
    """How long a 429 pauses the connection, in seconds: its Retry-After, at least
    1 s and at most `MAX_PAUSE_SECONDS` (CONN-2). The proposal that received the 429
    waits exactly this long too, so it resumes with the others."""
    return max(1.0, min(retry_after_seconds, MAX_PAUSE_SECONDS))


def pause(h: Health, now: datetime, retry_after_seconds: float, was_probe: bool) -> HealthChange | None:
    """A 429 pauses the whole connection until its Retry-After (CONN-2).

    The pause only grows (a shorter Retry-After never shortens a longer pause). A
    probe answered 429 reached a live platform: the breaker closes, and the pause
    holds deliveries back instead.

    Returns None when a longer pause is already set.
    """
    until = now + timedelta(seconds=pause_seconds(retry_after_seconds))
    if h.paused_until is not None and h.paused_until >= until:
        return None
    values: dict[str, Any] = {"paused_until": until}
    if was_probe and h.state == HALF_OPEN:
        values |= (after_success(h) or HealthChange({})).values
    return HealthChange(values, "paused", {"paused_until": until.isoformat()})


def gone(h: Health, now: datetime) -> HealthChange | None:
    """The endpoint answered 410: disable it (CONN-3); None when already disabled."""
    if h.disabled:
        return None
    return HealthChange({"disabled_at": now, "disabled_reason": GONE}, "disabled", {"reason": GONE})


def re_enable(h: Health) -> HealthChange | None:
    """An admin re-enables a disabled endpoint (CONN-3): it starts closed, with no
    failure streak and no pause. None when it is not disabled."""
    if not h.disabled:
        return None
    values = {
        "disabled_at": None,
        "disabled_reason": None,
        "paused_until": None,
        **(after_success(replace(h, state=OPEN)) or HealthChange({})).values,
    }
    return HealthChange(values, "re_enabled", {"was": h.disabled_reason})


def gauge_value(h: Health) -> int:
    """The breaker's state as a number for the metric: 0 closed, 1 half-open, 2 open."""
    return {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}.get(h.state, 2)
