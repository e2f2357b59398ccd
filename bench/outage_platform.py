"""A platform that is down (503) for the first OUTAGE seconds after the first request
it receives (0: never down), then applies each action once and answers an applied
receipt. It
counts what arrived during and after the outage: GET /stats.

    python outage_platform.py PORT OUTAGE_SECONDS
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATS = {"first_request_at": None, "outage_ends_at": None, "during_outage": 0, "after_outage": 0, "applied": 0}
EFFECTS: set[str] = set()
OUTAGE = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The status line and headers go out in one write and the body in another; with
    # Nagle's algorithm on, the body then waits for the client's delayed ACK of the
    # headers on a kept-alive connection: about 40 ms per request (the demo platform,
    # Werkzeug, does not).
    disable_nagle_algorithm = True

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self, status: int, value) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        with LOCK:
            self._answer(200, dict(STATS))

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        now = time.time()
        with LOCK:
            if STATS["first_request_at"] is None:
                STATS["first_request_at"] = now
                STATS["outage_ends_at"] = now + OUTAGE
            down = now < STATS["outage_ends_at"]
            STATS["during_outage" if down else "after_outage"] += 1
            key = self.headers.get("Idempotency-Key", "")
            if not down and key not in EFFECTS:
                EFFECTS.add(key)
                STATS["applied"] += 1
        if down:
            self._answer(503, {"error": "down for maintenance"})
            return
        receipt = {k: body.get(k) for k in ("action_id", "operation_id", "payload_digest")}
        self._answer(200, {**receipt, "status": "applied"})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()
