"""A scripted platform on pytest-httpserver: answer each request from a script,
and remember what arrived (for 'the platform saw each effect once')."""

from __future__ import annotations

import json
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
