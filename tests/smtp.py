"""A real SMTP server on loopback for tests (aiosmtpd), and what it received."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy

from aiosmtpd.controller import Controller


class SmtpInbox:
    """Messages the loopback SMTP server received, as (envelope recipients, message)."""

    def __init__(self) -> None:
        self.received: list[tuple[list[str], object]] = []
        self.arrived = threading.Event()
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        with self._lock:
            self.received.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content, policy=policy.default)))
        self.arrived.set()
        return "250 OK"

    def recipients(self) -> list[str]:
        """Every recipient of every message, one entry per delivery (duplicates kept)."""
        with self._lock:
            return [to for tos, _ in self.received for to in tos]

    def messages(self) -> list:
        with self._lock:
            return [message for _, message in self.received]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def loopback_smtp(app, public_url: str = "https://console.example.org") -> Iterator[SmtpInbox]:
    """Start an SMTP server on 127.0.0.1 and point the app's MAIL_* (and PUBLIC_URL) at it."""
    inbox = SmtpInbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    app.config.update(MAIL_SERVER="127.0.0.1", MAIL_PORT=controller.port, PUBLIC_URL=public_url)
    try:
        yield inbox
    finally:
        controller.stop()
