"""Failpoints for crash testing: make this process die (SIGKILL) at a named point.

Off unless FAILPOINTS is set, e.g. ``FAILPOINTS="before_send:0.3,after_response:0.3"``
(point:probability). The reliability tests set it on worker processes to prove that
a worker killed anywhere in a delivery loses and duplicates nothing.
"""

from __future__ import annotations

import os
import random
import signal

_points: dict[str, float] | None = None


def _load() -> dict[str, float]:
    points = {}
    for item in filter(None, os.environ.get("FAILPOINTS", "").split(",")):
        name, _, chance = item.partition(":")
        points[name.strip()] = float(chance or 1)
    return points


def failpoint(name: str) -> None:
    """Die here, now, with the given probability, when FAILPOINTS names this point."""
    global _points
    if _points is None:
        _points = _load()
    chance = _points.get(name)
    if chance and random.random() < chance:
        os.kill(os.getpid(), signal.SIGKILL)


class _Disarmed:
    def cancel(self) -> None:
        pass


def failpoint_later(name: str, seconds: float):
    """Maybe die `seconds` from now (e.g. while a request is in flight); returns a
    handle whose ``cancel()`` stops it once the guarded step finished."""
    global _points
    if _points is None:
        _points = _load()
    chance = _points.get(name)
    if not chance or random.random() >= chance:
        return _Disarmed()
    import threading

    timer = threading.Timer(seconds, os.kill, args=(os.getpid(), signal.SIGKILL))
    timer.daemon = True
    timer.start()
    return timer
