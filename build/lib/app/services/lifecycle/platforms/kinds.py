"""What a platform kind's attempt sends: one `Request` per attempt row (PLAT-4)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One request of an attempt.

    Attributes:
        purpose: ``update``, ``read-back`` or ``recheck`` (the attempt row's column).
        method: HTTP method.
        url: the full URL (under the connection's base URL, SEC-3).
        body: the bytes sent (empty for a GET); its digest is the row's request digest.
    """

    purpose: str
    method: str
    url: str
    body: bytes = b""
