"""A small demo platform: the other side of the contract (SPEC §5).

It keeps posts in memory (their text, author and state), takes down and restores them,
suspends and lifts the suspension of their authors' accounts (``GET /accounts``), verifies the Standard
Webhooks signature and bearer token of every action request, applies each
Idempotency-Key once (a repeat answers the stored receipt), and answers with a
receipt. ``POST /actions/notify`` delivers a restriction's notice to the affected user
(DSA-4), kept in ``notices``. In ``async`` mode it answers ``accepted`` and confirms later through the
console's async result API. ``POST /_control`` scripts failures for demos and tests.

It also serves a second, plain REST API that knows nothing of receipts (SPEC PLAT-3):
``POST /v2/moderation/requests`` takes ``{"post", "action": "remove"|"restore"}`` with
an ``Idempotency-Key`` and answers ``{"request": {"id", "post", "state": "done"}}``;
``GET /v2/posts/<reference>/moderation`` answers ``{"post", "visibility"}``. The
console's ``rest`` kind reads the first with JMESPath and confirms with the second.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field

import requests
from flask import Flask, jsonify, request
from standardwebhooks import Webhook, WebhookVerificationError

EFFECTS = {"/actions/takedown": "removed", "/actions/restore": "visible"}
# Account actions act on the author of the content named by the target (kind ``author_of``)
# or on an account reference itself; the platform keeps each account's state (TEMP demo).
ACCOUNT_EFFECTS = {"/actions/suspend": "suspended", "/actions/unsuspend": "active"}
# The affected user's notice of a restriction (DSA-4): kept in `PlatformState.notices`,
# once per Idempotency-Key; it changes no post or account.
NOTICE_PATH = "/actions/notify"

# The posts the demo platform serves: what users wrote, who wrote it, when. The demo's
# reports carry this as evidence (SPEC REV-1), so a reviewer sees the real content.
DEMO_CONTENT: dict[str, dict[str, str]] = {
    "post:1001": {
        "text": "Nobody wants you here. Log off for good or we will make you regret posting again.",
        "author_reference": "user:4412",
        "author_name": "nightowl_4412",
        "posted_at": "2026-11-29T21:14:05Z",
    },
    "post:1002": {
        "text": "Reminder that @quietfern posts from the library on Elm Street every Tuesday. Go say hi ;)",
        "author_reference": "user:4412",
        "author_name": "nightowl_4412",
        "posted_at": "2026-11-27T18:02:41Z",
    },
    "post:1003": {
        "text": "This referee should be banned from every pitch in the country. Worst call of the season.",
        "author_reference": "user:5120",
        "author_name": "goalline_greg",
        "posted_at": "2026-11-28T16:45:00Z",
    },
    "post:1004": {
        "text": "Everyone pile on her replies, she deserves it <script>alert('x')</script>",
        "author_reference": "user:7781",
        "author_name": "crowd_sourced",
        "posted_at": "2026-11-30T07:30:12Z",
    },
    "post:1005": {
        "text": "You people are pathetic. Enjoy your tiny forum.",
        "author_reference": "user:3090",
        "author_name": "passing_through",
        "posted_at": "2026-11-30T09:11:59Z",
    },
    "post:1006": {
        "text": "If you keep reporting my posts I will find out who you are.",
        "author_reference": "user:6603",
        "author_name": "anon6603",
        "posted_at": "2026-11-30T10:02:33Z",
    },
}


def demo_media(reference: str) -> bytes:
    """The demo's picture attached to a post (an SVG the platform serves)."""
    number = reference.split(":", 1)[1]
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="90"><rect width="320" height="90" fill="#eee"/>'
        f'<text x="16" y="52" font-size="20">Screenshot attached to post {number}</text></svg>'
    ).encode()


def demo_evidence(reference: str, platform_url: str) -> dict | None:
    """The evidence a platform sends with a report on one of its demo posts (REV-1)."""
    post = DEMO_CONTENT.get(reference)
    if post is None:
        return None
    number = reference.split(":", 1)[1]
    evidence = {
        "content_text": post["text"],
        "author_reference": post["author_reference"],
        "author_name": post["author_name"],
        "permalink": f"{platform_url}/posts/{number}",
        "posted_at": post["posted_at"],
    }
    if number == "1001":
        media = demo_media(reference)
        evidence["media"] = [
            {
                "url": f"{platform_url}/media/{number}.svg",
                "sha256": hashlib.sha256(media).hexdigest(),
                "mime_type": "image/svg+xml",
            }
        ]
    return evidence


@dataclass
class PlatformState:
    content: dict[str, str] = field(default_factory=dict)
    accounts: dict[str, str] = field(default_factory=dict)  # account reference -> active | suspended
    receipts: dict[str, dict] = field(default_factory=dict)  # by Idempotency-Key
    rest_answers: dict[str, dict] = field(default_factory=dict)  # the plain REST API's, by Idempotency-Key
    effects: list[dict] = field(default_factory=list)  # every effect applied, once per key
    notices: list[dict] = field(default_factory=list)  # every notice to a user (DSA-4), once per key
    requests_seen: int = 0
    fail_next: int = 0
    fail_status: int = 503
    mode: str = "sync"  # sync | async
    async_delay_seconds: float = 1.0
    response_delay_seconds: float = 0.0  # a slow platform (demos and crash tests)
    signing_secret: str | None = None
    bearer_token: str | None = None
    console_url: str | None = None
    console_token: str | None = None
    confirmations: list[int] = field(default_factory=list)  # HTTP status of each async confirmation
    confirmed: threading.Event = field(default_factory=threading.Event)  # set after each one
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, **settings) -> None:
        """Set secrets or the console's address after start (tests seed after serving)."""
        for key, value in settings.items():
            setattr(self, key, value)


def create_platform(
    signing_secret: str | None = None,
    bearer_token: str | None = None,
    console_url: str | None = None,
    console_token: str | None = None,
    posts: list[str] | None = None,
) -> Flask:
    """Build the demo platform app.

    Args:
        signing_secret: Standard Webhooks secret (``whsec_...``); None skips checks.
        bearer_token: token the console must send; None skips the check.
        console_url: the console's base URL, for async confirmations.
        console_token: the integration token used for async confirmations.
        posts: references of posts that exist and are visible at start.
    """
    app = Flask("demo_platform")
    state = PlatformState(
        content={ref: "visible" for ref in posts or []},
        signing_secret=signing_secret,
        bearer_token=bearer_token,
        console_url=console_url,
        console_token=console_token,
    )
    app.config["PLATFORM_STATE"] = state

    def _confirm_later(receipt: dict) -> None:
        time.sleep(state.async_delay_seconds)
        body = {**receipt, "status": "applied"}
        try:
            response = requests.post(
                f"{state.console_url}/api/v1/action-results",
                json=body,
                timeout=10,
                headers={"Authorization": f"Bearer {state.console_token}"},
            )
            state.confirmations.append(response.status_code)
        except requests.RequestException:
            state.confirmations.append(0)  # the console's confirmation deadline covers it
        state.confirmed.set()

    @app.post("/actions/<name>")
    def action(name: str):
        raw = request.get_data(as_text=True)
        if state.bearer_token and request.headers.get("Authorization") != f"Bearer {state.bearer_token}":
            return jsonify({"error": "unauthorized"}), 401
        if state.signing_secret:
            try:
                Webhook(state.signing_secret).verify(raw, dict(request.headers))
            except WebhookVerificationError:
                return jsonify({"error": "bad_signature"}), 401
        body = json.loads(raw)
        if state.response_delay_seconds:
            time.sleep(state.response_delay_seconds)
        key = request.headers.get("Idempotency-Key", "")
        effect = EFFECTS.get(request.path) or ACCOUNT_EFFECTS.get(request.path)
        if request.path == NOTICE_PATH:
            effect = "notified"
        if effect is None or not key:
            return jsonify({"error": "unknown_action"}), 404
        with state.lock:
            state.requests_seen += 1
            if state.fail_next > 0:
                state.fail_next -= 1
                return jsonify({"error": "scripted_failure"}), state.fail_status
            if key in state.receipts:
                return jsonify(state.receipts[key])
            reference = body["target"].get("reference")
            if request.path == NOTICE_PATH:
                state.notices.append(_notice_of(key, body))
            elif request.path in ACCOUNT_EFFECTS:
                reference = account_of(body["target"])
                state.accounts[reference] = effect
            else:
                state.content[reference] = effect
            if request.path != NOTICE_PATH:  # a notice changes no post or account
                state.effects.append({"idempotency_key": key, "reference": reference, "effect": effect})
            receipt = {
                "action_id": body["action_id"],
                "operation_id": body["operation_id"],
                "payload_digest": body["payload_digest"],
                "status": "accepted" if state.mode == "async" else "applied",
                "provider_request_id": f"demo-{len(state.effects) + len(state.notices)}",
            }
            state.receipts[key] = {**receipt, "status": "applied"} if state.mode == "async" else receipt
        if state.mode == "async" and state.console_url:
            threading.Thread(target=_confirm_later, args=(receipt,), daemon=True).start()
        return jsonify(receipt)

    def _rest_refused():
        if state.bearer_token and request.headers.get("Authorization") != f"Bearer {state.bearer_token}":
            return jsonify({"problem": "unauthorized"}), 401
        return None

    @app.post("/v2/moderation/requests")
    def rest_request():
        """The plain REST API (PLAT-3): its own request and answer shapes, no receipt."""
        refused = _rest_refused()
        if refused:
            return refused
        body = request.get_json(silent=True) or {}
        post, wanted = body.get("post"), {"remove": "removed", "restore": "visible"}.get(body.get("action"))
        key = request.headers.get("Idempotency-Key", "")
        if not isinstance(post, str) or wanted is None or not key:
            return jsonify({"problem": "bad_request", "detail": "post, action and Idempotency-Key are required"}), 422
        if state.response_delay_seconds:
            time.sleep(state.response_delay_seconds)
        with state.lock:
            state.requests_seen += 1
            if state.fail_next > 0:
                state.fail_next -= 1
                return jsonify({"problem": "scripted_failure"}), state.fail_status
            if key in state.rest_answers:
                return jsonify(state.rest_answers[key]), 200
            if post not in state.content:
                return jsonify({"problem": "no_such_post", "post": post}), 404
            state.content[post] = wanted
            state.effects.append({"idempotency_key": key, "reference": post, "effect": wanted, "api": "rest"})
            answer = {"request": {"id": f"mr-{len(state.effects)}", "post": post, "state": "done"}}
            state.rest_answers[key] = answer
        return jsonify(answer), 201

    @app.get("/v2/posts/<path:reference>/moderation")
    def rest_visibility(reference: str):
        refused = _rest_refused()
        if refused:
            return refused
        with state.lock:
            visibility = state.content.get(reference)
        if visibility is None:
            return jsonify({"problem": "no_such_post", "post": reference}), 404
        return jsonify({"post": reference, "visibility": visibility})

    @app.get("/content")
    def content():
        with state.lock:
            posts = {
                ref: {**DEMO_CONTENT[ref], "state": status}
                for ref, status in state.content.items()
                if ref in DEMO_CONTENT
            }
            return jsonify(
                {
                    "content": dict(state.content),
                    "accounts": dict(state.accounts),
                    "posts": posts,
                    "effects": list(state.effects),
                    "notices": list(state.notices),
                    "requests_seen": state.requests_seen,
                }
            )

    @app.get("/accounts")
    def accounts():
        """Every known account's state: active, or suspended by a temporary action."""
        with state.lock:
            known = {post["author_reference"]: "active" for post in DEMO_CONTENT.values()}
            return jsonify({"accounts": {**known, **state.accounts}})

    @app.get("/posts/<number>")
    def post(number: str):
        reference = f"post:{number}"
        with state.lock:
            status = state.content.get(reference)
        if status is None or reference not in DEMO_CONTENT:
            return jsonify({"error": "not_found"}), 404
        if status == "removed":
            return jsonify({"reference": reference, "state": "removed"}), 451
        return jsonify({"reference": reference, "state": status, **DEMO_CONTENT[reference]})

    @app.get("/media/<number>.svg")
    def media(number: str):
        reference = f"post:{number}"
        if reference not in DEMO_CONTENT:
            return jsonify({"error": "not_found"}), 404
        return demo_media(reference), 200, {"Content-Type": "image/svg+xml"}

    @app.post("/_control")
    def control():
        settings = request.get_json(force=True)
        with state.lock:
            state.fail_next = int(settings.get("fail_next", state.fail_next))
            state.fail_status = int(settings.get("fail_status", state.fail_status))
            state.mode = settings.get("mode", state.mode)
            state.async_delay_seconds = float(settings.get("async_delay_seconds", state.async_delay_seconds))
            state.response_delay_seconds = float(settings.get("response_delay_seconds", state.response_delay_seconds))
            for ref in settings.get("posts", []):
                state.content.setdefault(ref, "visible")
        return jsonify({"ok": True})

    return app


def _notice_of(key: str, body: dict) -> dict:
    """What the platform keeps of a notice it delivers to a user (DSA-4)."""
    payload = body.get("payload") or {}
    return {
        "idempotency_key": key,
        "action_id": body.get("action_id"),
        "user": account_of(body.get("target") or {}),
        **{name: payload.get(name) for name in ("puid", "language", "subject", "text", "complaint_until")},
    }


def account_of(target: dict) -> str:
    """The account an account action acts on: the author of the post an ``author_of``
    target names, else the target's own reference."""
    reference = target.get("reference", "")
    if target.get("kind") == "author_of" and reference in DEMO_CONTENT:
        return DEMO_CONTENT[reference]["author_reference"]
    return reference


def platform_state(app: Flask) -> PlatformState:
    return app.config["PLATFORM_STATE"]


def serve(app: Flask, host: str = "127.0.0.1", port: int = 0):
    """Serve `app` on a background thread; returns (server, base_url)."""
    from werkzeug.serving import make_server

    server = make_server(host, port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, f"http://{host}:{server.server_port}"


def main() -> None:
    """Run the demo platform: ``python -m app.demo_platform --port 5050 ...``."""
    import argparse
    import os

    parser = argparse.ArgumentParser(description="Demo platform for the action console")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5050)
    parser.add_argument("--posts", default="", help="comma-separated post references")
    args = parser.parse_args()
    app = create_platform(
        signing_secret=os.environ.get("DEMO_PLATFORM_SIGNING_SECRET"),
        bearer_token=os.environ.get("DEMO_PLATFORM_BEARER_TOKEN"),
        console_url=os.environ.get("DEMO_CONSOLE_URL"),
        console_token=os.environ.get("DEMO_CONSOLE_TOKEN"),
        posts=[p for p in args.posts.split(",") if p],
    )
    from werkzeug.serving import run_simple

    run_simple(args.host, args.port, app, threaded=True)


if __name__ == "__main__":
    main()
