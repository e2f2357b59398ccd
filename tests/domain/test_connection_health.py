"""A connection's circuit breaker, pause and disabling, as pure rules (SPEC CONN-1,
CONN-2, CONN-3). The rate limit runs in Redis: tests/services/test_rate_limit.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.domain import connection_health as ch
from app.domain.connection_health import Health, Settings

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SETTINGS = Settings()


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def fail(h: Health, times: int, settings: Settings = SETTINGS, at: datetime = NOW) -> Health:
    for _ in range(times):
        h = ch.after_failure(h, settings, at, was_probe=False).applied_to(h)
    return h


def test_conn1_defaults_are_five_failures_thirty_seconds_ten_minutes_and_a_day():
    """CONN-1, CONN-3: the defaults the spec names."""
    assert (SETTINGS.failure_threshold, SETTINGS.first_probe_seconds, SETTINGS.max_probe_seconds) == (5, 30, 600)
    assert SETTINGS.failure_window_seconds == 86_400 and SETTINGS.rate_limit_per_second is None


def test_conn1_closed_breaker_sends():
    """CONN-1: a closed breaker admits every delivery and writes nothing."""
    admission = ch.admit(Health(), NOW, 40)
    assert admission == ch.Admission(True)


def test_conn1_opens_after_n_consecutive_failures():
    """CONN-1: four failures keep it closed; the fifth opens it with the first probe in 30 s."""
    h = fail(Health(), 4)
    assert (h.state, h.consecutive_failures, h.failing_since) == (ch.CLOSED, 4, NOW)
    change = ch.after_failure(h, SETTINGS, later(1), was_probe=False)
    assert change.transition == "opened"
    assert change.details == {"consecutive_failures": 5, "next_probe_in_seconds": 30}
    h = change.applied_to(h)
    assert (h.state, h.opened_at, h.next_probe_at, h.probe_delay_seconds) == (ch.OPEN, later(1), later(31), 30)
    assert h.version == 5 and h.failing_since == NOW


def test_conn1_threshold_is_configurable():
    """CONN-1: a connection version may open after 2 failures with a 5 s first probe."""
    settings = Settings(failure_threshold=2, first_probe_seconds=5)
    h = fail(Health(), 2, settings)
    assert (h.state, h.next_probe_at) == (ch.OPEN, later(5))


def test_conn1_a_success_ends_the_streak():
    """CONN-1: the failures must be consecutive: a success in between resets them."""
    h = fail(Health(), 4)
    h = ch.after_success(h).applied_to(h)
    assert (h.state, h.consecutive_failures, h.failing_since) == (ch.CLOSED, 0, None)
    assert fail(h, 4).state == ch.CLOSED


def test_conn1_a_healthy_connection_writes_nothing_on_success():
    """CONN-1: closed and no streak: nothing to write on the hot path."""
    assert ch.after_success(Health()) is None
    assert ch.after_success(Health(consecutive_failures=1)) is not None
    assert ch.after_success(Health(failing_since=NOW)) is not None


def test_conn1_open_breaker_defers_until_the_probe_time():
    """CONN-1: while open, nothing is sent: a delivery waits for the probe time."""
    h = fail(Health(), 5)
    admission = ch.admit(h, later(29.9), 40)
    assert (admission.send, admission.wait_code, admission.wait_until) == (False, ch.WAIT_OPEN, later(30))
    assert admission.change is None


def test_conn1_one_probe_when_half_open():
    """CONN-1: at the probe time one delivery takes the probe (half-open, with a
    lease); the others wait for that lease while the probe is in flight."""
    h = fail(Health(), 5)
    probe = ch.admit(h, later(30), 40)
    assert (probe.send, probe.probe, probe.change.transition) == (True, True, "probe_started")
    h = probe.change.applied_to(h)
    assert (h.state, h.probe_lease_expires_at) == (ch.HALF_OPEN, later(70))
    other = ch.admit(h, later(31), 40)
    assert (other.send, other.wait_code, other.wait_until) == (False, ch.WAIT_PROBE, later(70))


def test_conn1_a_probe_whose_worker_died_is_taken_again_after_its_lease():
    """CONN-1: a half-open probe lease that ended lets one more probe go."""
    h = Health(state=ch.HALF_OPEN, probe_lease_expires_at=later(10), probe_delay_seconds=30)
    assert ch.admit(h, later(9), 40).send is False
    again = ch.admit(h, later(10), 40)
    assert again.probe and again.change.values["probe_lease_expires_at"] == later(50)


def test_conn1_probe_success_closes():
    """CONN-1: the probe's success closes the breaker and clears the streak."""
    h = Health(state=ch.HALF_OPEN, consecutive_failures=5, failing_since=NOW, probe_delay_seconds=30)
    change = ch.after_success(h)
    assert change.transition == "closed"
    h = change.applied_to(h)
    assert (h.state, h.consecutive_failures, h.next_probe_at, h.probe_delay_seconds) == (ch.CLOSED, 0, None, None)
    assert ch.admit(h, NOW, 40).send


def test_conn1_probe_failure_reopens_with_the_delay_doubled_up_to_ten_minutes():
    """CONN-1: a failed probe reopens the breaker: 30 → 60 → 120 … capped at 600 s."""
    h = fail(Health(), 5)
    delays = []
    for _ in range(7):
        h = ch.admit(h, h.next_probe_at, 40).change.applied_to(h)
        change = ch.after_failure(h, SETTINGS, NOW, was_probe=True)
        assert change.transition == "reopened"
        h = change.applied_to(h)
        delays.append(h.probe_delay_seconds)
        assert h.next_probe_at == NOW + timedelta(seconds=h.probe_delay_seconds) and h.state == ch.OPEN
    assert delays == [60, 120, 240, 480, 600, 600, 600]


def test_conn1_next_probe_delay_without_a_current_delay_starts_from_the_first():
    """CONN-1: doubling starts from the configured first probe delay."""
    assert ch.next_probe_delay(None, Settings(first_probe_seconds=7)) == 14
    assert ch.next_probe_delay(400, SETTINGS) == 600


def test_conn1_a_late_failure_of_an_older_request_does_not_reopen_a_half_open_breaker():
    """CONN-1: only the probe's own failure reopens; another request's failure counts."""
    h = Health(state=ch.HALF_OPEN, consecutive_failures=5, failing_since=NOW, probe_delay_seconds=30)
    change = ch.after_failure(h, SETTINGS, later(1), was_probe=False)
    assert change.transition is None and change.values == {"consecutive_failures": 6, "failing_since": NOW}


def test_conn1_only_retryable_platform_failures_count():
    """CONN-1: timeouts, refused connections and 5xx count; 4xx, refused destinations and 429 do not."""
    assert ch.counts_as_failure(True, None, "connection_timeout")
    assert ch.counts_as_failure(True, 503, "platform_server_error")
    assert not ch.counts_as_failure(False, 400, "platform_client_error")
    assert not ch.counts_as_failure(False, None, "egress_host_not_allowed")
    assert not ch.counts_as_failure(True, 429, "platform_rate_limited")
    assert not ch.counts_as_failure(True, None, "platform_rate_limited")


def test_conn1_gauge_values():
    """CONN-1: the metric's numbers: 0 closed, 1 half-open, 2 open."""
    assert [ch.gauge_value(Health(state=s)) for s in ch.STATES] == [0, 2, 1]


def test_conn2_a_429_pauses_the_connection_until_retry_after():
    """CONN-2: a 429 holds every delivery until its Retry-After."""
    change = ch.pause(Health(), NOW, 20, was_probe=False)
    assert change.transition == "paused" and change.details == {"paused_until": later(20).isoformat()}
    h = change.applied_to(Health())
    admission = ch.admit(h, later(19), 40)
    assert (admission.send, admission.wait_code, admission.wait_until) == (False, ch.WAIT_PAUSED, later(20))
    assert ch.admit(h, later(20), 40).send


def test_conn2_a_pause_only_grows_and_is_bounded():
    """CONN-2: a shorter Retry-After never shortens a pause; at least 1 s, at most an hour."""
    h = ch.pause(Health(), NOW, 60, was_probe=False).applied_to(Health())
    assert ch.pause(h, NOW, 30, was_probe=False) is None
    assert ch.pause(h, NOW, 60, was_probe=False) is None
    assert ch.pause(h, NOW, 61, was_probe=False).values["paused_until"] == later(61)
    assert ch.pause(Health(), NOW, 0, was_probe=False).values["paused_until"] == later(1)
    assert ch.pause(Health(), NOW, 10**6, was_probe=False).values["paused_until"] == later(3600)


def test_conn2_a_probe_answered_429_closes_the_breaker_and_pauses():
    """CONN-2: a 429 to the probe shows a live platform: closed, paused."""
    h = Health(state=ch.HALF_OPEN, consecutive_failures=5, failing_since=NOW, probe_delay_seconds=30)
    h = ch.pause(h, NOW, 10, was_probe=True).applied_to(h)
    assert (h.state, h.consecutive_failures, h.paused_until) == (ch.CLOSED, 0, later(10))
    still = Health(state=ch.HALF_OPEN, consecutive_failures=5, probe_delay_seconds=30)
    assert ch.pause(still, NOW, 10, was_probe=False).values == {"paused_until": later(10)}


def test_conn3_a_410_disables_the_endpoint():
    """CONN-3: 410 disables; deliveries wait; disabling twice writes nothing."""
    change = ch.gone(Health(), NOW)
    assert (change.transition, change.values) == ("disabled", {"disabled_at": NOW, "disabled_reason": ch.GONE})
    h = change.applied_to(Health())
    admission = ch.admit(h, NOW, 40)
    assert (admission.send, admission.wait_code) == (False, ch.WAIT_DISABLED)
    assert admission.wait_until == later(ch.DISABLED_RECHECK_SECONDS)
    assert ch.gone(h, NOW) is None


def test_conn3_failing_longer_than_the_window_disables():
    """CONN-3: failures without a success for 24 h (configurable) disable the endpoint."""
    h = fail(Health(), 5)
    before = ch.after_failure(h, SETTINGS, later(86_399), was_probe=False)
    assert before.transition is None
    change = ch.after_failure(h, SETTINGS, later(86_400), was_probe=False)
    assert change.transition == "disabled" and change.values["disabled_reason"] == ch.FAILING
    assert change.details["failing_since"] == NOW.isoformat()
    short = Settings(failure_window_seconds=60)
    assert ch.after_failure(fail(Health(), 1, short), short, later(60), False).transition == "disabled"
    disabled = change.applied_to(h)
    assert ch.after_failure(disabled, SETTINGS, later(90_000), False).transition is None


def test_conn3_disabled_wins_over_pause_and_breaker():
    """CONN-3: a disabled endpoint waits whatever its breaker or pause says."""
    h = Health(disabled_at=NOW, disabled_reason=ch.GONE, paused_until=later(5), state=ch.OPEN)
    assert ch.admit(h, NOW, 40).wait_code == ch.WAIT_DISABLED


def test_conn3_re_enable_starts_closed_without_streak_or_pause():
    """CONN-3: an admin re-enables: closed, no failures, no pause; only when disabled."""
    h = Health(
        state=ch.OPEN,
        consecutive_failures=9,
        failing_since=NOW,
        next_probe_at=later(60),
        paused_until=later(5),
        disabled_at=NOW,
        disabled_reason=ch.FAILING,
    )
    change = ch.re_enable(h)
    assert change.transition == "re_enabled" and change.details == {"was": ch.FAILING}
    h = change.applied_to(h)
    assert (h.state, h.consecutive_failures, h.disabled_at, h.paused_until, h.next_probe_at) == (
        ch.CLOSED,
        0,
        None,
        None,
        None,
    )
    assert ch.re_enable(h) is None


def test_conn1_a_connection_holds_deliveries_back_while_disabled_paused_or_not_closed():
    """CONN-1..3: disabled, paused by a 429 until later, or a breaker open or probing
    holds every delivery back; a pause that has ended does not."""
    assert not ch.holds_back(Health(), NOW)
    assert ch.holds_back(Health(disabled_at=NOW), NOW)
    assert ch.holds_back(Health(paused_until=NOW + timedelta(seconds=1)), NOW)
    assert not ch.holds_back(Health(paused_until=NOW), NOW)  # the pause ends at its instant
    assert not ch.holds_back(Health(paused_until=NOW - timedelta(seconds=1)), NOW)
    assert ch.holds_back(Health(state=ch.OPEN), NOW)
    assert ch.holds_back(Health(state=ch.OPEN, paused_until=NOW - timedelta(seconds=1)), NOW)
