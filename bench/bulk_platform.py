"""A platform for the bulk benchmark (SPEC BULK-6, CONN-2): it answers 429 with a
``Retry-After`` on a share of the requests it receives (chosen at random, fixed
seed), applies every other action once per ``Idempotency-Key`` and answers an
applied receipt. It counts requests, 429s, distinct keys, effects, and repeats (a
key that came again after it was applied), and the most requests it received in any
one second: GET /stats.

    python bulk_platform.py PORT [SHARE_429] [RETRY_AFTER_SECONDS]
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
RANDOM = random.Random(24)
STATS = {"requests": 0, "rate_limited": 0, "applied": 0, "repeats": 0, "first_at": None, "last_applied_at": None}
KEYS: set[str] = set()
EFFECTS: set[str] = set()
PER_SECOND: Counter[int] = Counter()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

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
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        key = self.headers.get("Idempotency-Key", "")
        now = time.time()
        with LOCK:
            STATS["requests"] += 1
            STATS["first_at"] = STATS["first_at"] or now
            PER_SECOND[int(now)] += 1
            KEYS.add(key)
            limited = RANDOM.random() < SHARE_429
            if limited:
                STATS["rate_limited"] += 1
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
