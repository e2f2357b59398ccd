"""A scripted platform on pytest-httpserver: answer each request from a script,
and remember what arrived (for 'the platform saw each effect once')."""

from __future__ import annotations

import contextlib
import json
import select
import threading
import time
from collections.abc import Callable

from werkzeug import Request, Response


def receipt_for(body: dict, status: str = "applied", **extra) -> dict:
    return {
        "action_id": body["action_id"],
        "operation_id": body["operation_id"],
        "payload_digest": body["payload_digest"],
        "status": status,
        **extra,
    }


class Script:
    """Each request is answered by the next step (the last step repeats).

    A step is a callable (request body dict) -> werkzeug Response.
    """

    def __init__(self, *steps: Callable[[dict], Response]) -> None:
        self.steps = list(steps)
        self.requests: list[tuple[dict, dict]] = []  # (headers, body)
        self.effects: dict[str, int] = {}  # Idempotency-Key -> times applied
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        body = json.loads(request.get_data())
        with self.lock:
            self.requests.append((dict(request.headers), body))
            step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        return step(body, request, self)

    def applied(self, request: Request) -> None:
        key = request.headers.get("Idempotency-Key")
        with self.lock:
            self.effects[key] = self.effects.get(key, 0) + 1


def json_response(value, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(value), status=status, headers=headers or {}, content_type="application/json")


def applied(**extra):
    """Apply once per Idempotency-Key and answer an applied receipt."""

    def step(body, request, script: Script):
        key = request.headers.get("Idempotency-Key")
        if key not in script.effects:
            script.applied(request)
        return json_response(receipt_for(body, "applied", **extra))

    return step


def accepted():
    def step(body, request, script):
        script.applied(request)
        return json_response(receipt_for(body, "accepted"))

    return step


def receipt(status: str, **extra):
    return lambda body, request, script: json_response(receipt_for(body, status, **extra))


def http_status(code: int, headers: dict | None = None, body=None):
    return lambda body_, request, script: json_response(body or {"error": "scripted"}, code, headers)


def raw(text: str, code: int = 200):
    return lambda body, request, script: Response(text, status=code, content_type="text/plain")


def slow(seconds: float, then=None):
    def step(body, request, script):
        time.sleep(seconds)
        return (then or applied())(body, request, script)

    return step


def redirect(location: str):
    return lambda body, request, script: Response("", status=302, headers={"Location": location})


def json_body(value):
    return lambda body, request, script: json_response(value)


class TricklingPlatform:
    """A loopback platform that sends its status line and headers at once, then the
    body (an `applied` receipt) in `pieces` parts `gap` seconds apart: every single
    read finishes well within a timeout, the whole answer does not (issue 14).

    Attributes:
        requests: one dict per request: ``body``, ``started`` and ``ended``
            (time.monotonic(), ``ended`` None while the answer is still going),
            ``pieces_sent``, ``hung_up`` (the client went away before the last
            piece) and ``done`` (a threading.Event set when the answer ended).
        first_piece: set when the first piece of a body has been sent.
    """

    def __init__(self, pieces: int = 4, gap: float = 1.0) -> None:
        import socket

        self.pieces, self.gap = pieces, gap
        self.requests: list[dict] = []
        self.first_piece = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def overlapping(self) -> int:
        """How many requests started while an earlier one was still being answered."""
        with self._lock:
            spans = [(r["started"], r["ended"] or float("inf")) for r in self.requests]
        return sum(1 for i, (start, _) in enumerate(spans) if any(s <= start < e for s, e in spans[:i]))

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(rest) < length:
                rest += connection.recv(65536)
            body = json.loads(rest[:length])
            record = {"body": body, "started": time.monotonic(), "ended": None, "pieces_sent": 0, "hung_up": False}
            record["done"] = threading.Event()
            with self._lock:
                self.requests.append(record)
            answer = json.dumps(receipt_for(body, "applied") if "action_id" in body else {"status": "applied"}).encode()
            try:
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                )
                size = -(-len(answer) // self.pieces)
                for index in range(self.pieces):
                    # The trickle is the scenario, not a test's sleep; a client that
                    # hangs up (readable: end of stream) ends the answer at once.
                    if index and select.select([connection], [], [], self.gap)[0] and not connection.recv(1):
                        record["hung_up"] = True
                        return
                    connection.sendall(answer[index * size : (index + 1) * size])
                    record["pieces_sent"] += 1
                    self.first_piece.set()
            except OSError:  # the client gave up: this answer ends here
                record["hung_up"] = True
            finally:
                record["ended"] = time.monotonic()
                record["done"].set()

    def close(self) -> None:
        import socket

        self._stop.set()
        with contextlib.suppress(OSError):  # wakes the blocked accept(), which close() alone does not
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=5)
