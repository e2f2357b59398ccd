"""A platform for the bulk benchmark (SPEC BULK-6, CONN-2). It allows ALLOW
requests per second (a token bucket holding one second's worth, refilled at ALLOW
per second: the same rule as the console's GCRA limit) and answers 429 with a
``Retry-After`` to a request above it; it also answers 429 to an injected share of
the requests it receives (chosen at random, fixed seed). Every other action is
applied once per ``Idempotency-Key``, with an applied receipt. It counts requests,
429s above its rate (``over_rate``), injected 429s (``injected``), distinct keys,
effects, and repeats (a key that came again after it was applied), and the most
requests it received in any one second: GET /stats. POST /_control
{"share_429": x} sets the injected share and starts the counts afresh (a bench's
second measurement on the same connection).

    python bulk_platform.py PORT [SHARE_429] [RETRY_AFTER_SECONDS] [ALLOW_PER_SECOND]

ALLOW_PER_SECOND 0 (the default) allows any rate.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SHARE_429 = float(sys.argv[2]) if len(sys.argv) > 2 else 0.10
RETRY_AFTER = sys.argv[3] if len(sys.argv) > 3 else "1"
ALLOW = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
RANDOM = random.Random(24)
FRESH = {"requests": 0, "rate_limited": 0, "over_rate": 0, "injected": 0, "applied": 0, "repeats": 0,
         "first_at": None, "last_applied_at": None}
STATS = dict(FRESH)
KEYS: set[str] = set()
EFFECTS: set[str] = set()
PER_SECOND: Counter[int] = Counter()
BUCKET = {"tokens": ALLOW, "at": time.monotonic()}  # one second's worth at the start


def over_rate() -> bool:
    """Whether this request is above ALLOW per second (takes a token if not). Under LOCK."""
    if not ALLOW:
        return False
    now = time.monotonic()
    BUCKET["tokens"] = min(ALLOW, BUCKET["tokens"] + (now - BUCKET["at"]) * ALLOW)
    BUCKET["at"] = now
    if BUCKET["tokens"] < 1.0:
        return True
    BUCKET["tokens"] -= 1.0
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body leave in two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, about 40 ms per answer on loopback
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, status: int, value, headers: dict | None = None) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, header in (headers or {}).items():
            self.send_header(name, header)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        with LOCK:
            stats = {**STATS, "distinct_keys": len(KEYS), "effects": len(EFFECTS),
                     "max_requests_in_a_second": max(PER_SECOND.values(), default=0)}
        self._answer(200, stats)

    def do_POST(self) -> None:
        global SHARE_429, RANDOM
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path == "/_control":
            with LOCK:
                SHARE_429, RANDOM = float(body.get("share_429", SHARE_429)), random.Random(24)
                STATS.clear()
                STATS.update(FRESH)
                KEYS.clear()
                EFFECTS.clear()
                PER_SECOND.clear()
            self._answer(200, {"share_429": SHARE_429})
            return
        key = self.headers.get("Idempotency-Key", "")
        now = time.time()
        with LOCK:
            STATS["requests"] += 1
            STATS["first_at"] = STATS["first_at"] or now
            PER_SECOND[int(now)] += 1
            KEYS.add(key)
            injected = RANDOM.random() < SHARE_429
            limited = injected or over_rate()
            if limited:
                STATS["rate_limited"] += 1
                STATS["injected" if injected else "over_rate"] += 1
            elif key in EFFECTS:
                STATS["repeats"] += 1
            else:
                EFFECTS.add(key)
                STATS["applied"] += 1
                STATS["last_applied_at"] = now
        if limited:
            self._answer(429, {"error": "slow down"}, {"Retry-After": RETRY_AFTER})
            return
        receipt = {k: body.get(k) for k in ("action_id", "operation_id", "payload_digest")}
        self._answer(200, {**receipt, "status": "applied"})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.request_queue_size = 128
    server.serve_forever()
