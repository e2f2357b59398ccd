"""Structured logs: JSON lines with the request, operator, proposal, operation,
attempt and cycle they concern, on web and worker alike; secrets never logged.

Fields are bound for a block of work with `bind(...)` (a context variable, so each
request, thread and job has its own) and added to every record by a filter.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pythonjsonlogger.json import JsonFormatter

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("log_context", default=None)

# Tokens and secrets that must never reach a log line, whatever logged them.
SECRET_PATTERNS = [
    (re.compile(r"sct_[A-Za-z0-9_\-]{8,}"), "sct_[redacted]"),
    (re.compile(r"whsec_[A-Za-z0-9+/=]{8,}"), "whsec_[redacted]"),
    (re.compile(r"(?i)(bearer\s+)[^\s\"']+"), r"\1[redacted]"),
    (re.compile(r"(?i)(password|secret|token)([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), r"\1\2[redacted]"),
]


def redact(text: str) -> str:
    """Mask every token, secret or password in `text`."""
    for pattern, replacement in SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add fields to every log record written inside the block."""
    token = _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def push(**fields: Any) -> contextvars.Token:
    """Bind fields until `pop(token)` (for hooks that cannot use a with-block)."""
    return _context.set({**(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}})


def pop(token: contextvars.Token) -> None:
    _context.reset(token)


def bound() -> dict[str, Any]:
    return dict(_context.get() or {})


class ContextFilter(logging.Filter):
    """Adds the bound fields and the process role; redacts secrets."""

    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        record.role = self.role
        record.pid = os.getpid()
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


def configure_logging(role: str, level: str = "INFO", fmt: str | None = None, stream=None) -> None:
    """Send the root logger to `stream` (stderr) as JSON lines, or text when LOG_FORMAT=text.

    Args:
        role: ``web`` or ``worker`` (a field of every line).
        level: a logging level name.
        fmt: ``json`` (default) or ``text``.
    """
    fmt = (fmt or os.environ.get("LOG_FORMAT") or "json").lower()
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(role)s] %(name)s: %(message)s"))
    else:
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "asctime": "time"},
                timestamp=False,
            )
        )
    handler.addFilter(ContextFilter(role))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the web hooks log each request
