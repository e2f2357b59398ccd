"""The HTTP call to a platform: destination policy, signing, timeouts, size cap.

This module knows nothing of the database: it turns an `EgressRequest` into an
`EgressResponse` or raises `EgressError` with the attempt's response class. The
delivery service records both in the connection_attempts table.

Policy (SPEC DLV-4, §5): the host must be one of the connection's allowed hosts;
loopback, private, link-local and other non-public addresses are refused unless the
configuration allows them; redirects are never followed; the response body is read
up to a cap; connect and read timeouts come from the connection (at most 120 s).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from standardwebhooks import Webhook

from app.domain.digests import sha256_digest

MAX_TIMEOUT_SECONDS = 120
RETRYABLE_STATUSES = {408, 429}


@dataclass(frozen=True)
class EgressPolicy:
    allowed_hosts: tuple[str, ...]
    allow_private: bool = False
    max_response_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class EgressRequest:
    method: str
    url: str
    body: bytes  # canonical JSON, signed as sent
    message_id: str  # Standard Webhooks webhook-id
    idempotency_key: str
    timeout_seconds: float
    bearer_token: str | None = None
    signing_secret: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EgressResponse:
    status: int
    body: bytes
    digest: str
    duration_ms: int


class EgressError(Exception):
    """A request that did not produce a usable 2xx answer.

    Attributes:
        code: error code, e.g. ``platform_server_error``.
        retryable: whether another attempt may succeed.
        delay_seconds: base retry delay (the platform's Retry-After when given).
        response_class: the attempt's class (timeout, network_error, ...).
        sent: whether the request may have reached the platform.
    """

    def __init__(
        self,
        code: str,
        *,
        retryable: bool,
        response_class: str,
        sent: bool,
        delay_seconds: float = 15,
        status: int | None = None,
        digest: str | None = None,
        duration_ms: int | None = None,
    ) -> None:
        super().__init__(code)
        self.code = code
        self.retryable = retryable
        self.response_class = response_class
        self.sent = sent
        self.delay_seconds = delay_seconds
        self.status = status
        self.digest = digest
        self.duration_ms = duration_ms


def build_url(base_url: str, path: str) -> str:
    """Join the connection's base URL and the component's path."""
    return urljoin(base_url.rstrip("/") + "/", path.lstrip("/"))


def _forbidden_address(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def check_destination(url: str, policy: EgressPolicy) -> list[str]:
    """Refuse a destination the policy does not allow; return its resolved addresses.

    Raises:
        EgressError: ``egress_url_invalid``, ``egress_host_not_allowed`` or
            ``egress_destination_forbidden`` (class ``refused``, nothing sent).
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise EgressError("egress_url_invalid", retryable=False, response_class="refused", sent=False)
    allowed = {h.lower() for h in policy.allowed_hosts}
    if host not in allowed:
        raise EgressError("egress_host_not_allowed", retryable=False, response_class="refused", sent=False)
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror as error:
        raise EgressError("connection_failed", retryable=True, response_class="network_error", sent=False) from error
    addresses = sorted({info[4][0] for info in infos})
    if not policy.allow_private and any(_forbidden_address(a) for a in addresses):
        raise EgressError("egress_destination_forbidden", retryable=False, response_class="refused", sent=False)
    return addresses


def retry_after_seconds(value: str | None, default: float = 15) -> float:
    """Seconds from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return default
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(1.0, (when - datetime.now(UTC)).total_seconds())


def signed_headers(request: EgressRequest) -> dict[str, str]:
    """Headers of the request: JSON, idempotency key, bearer token, Standard Webhooks."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "Idempotency-Key": request.idempotency_key,
        "User-Agent": "safest-console/1",
        **request.extra_headers,
    }
    if request.bearer_token:
        headers["Authorization"] = f"Bearer {request.bearer_token}"
    if request.signing_secret:
        now = datetime.now(UTC)
        signature = Webhook(request.signing_secret).sign(request.message_id, now, request.body.decode("utf-8"))
        headers["webhook-id"] = request.message_id
        headers["webhook-timestamp"] = str(int(now.timestamp()))
        headers["webhook-signature"] = signature
    return headers


def _may_have_been_sent(error: requests.RequestException) -> bool:
    """False only when the connection itself was never made (refused, DNS)."""
    reason = error.args[0] if error.args else None
    reason = getattr(reason, "reason", reason)
    return not isinstance(reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.NameResolutionError)


def _read_capped(response: requests.Response, limit: int) -> bytes | None:
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def send(request: EgressRequest, policy: EgressPolicy, session: requests.Session | None = None) -> EgressResponse:
    """Send one attempt and return its 2xx response.

    Args:
        request: what to send; ``timeout_seconds`` is capped at 120.
        policy: allowed hosts, private-address switch, response size cap (bytes).
        session: a `requests.Session` to reuse connections (optional).

    Raises:
        EgressError: refused destinations (``refused``); ``connection_timeout``
            (``timeout``); ``connection_failed`` (``network_error``);
            ``platform_redirect_refused``, ``platform_client_error``,
            ``platform_request_timeout``, ``platform_rate_limited``,
            ``platform_server_error`` (HTTP classes, 408/429/5xx retryable and
            honouring Retry-After); ``platform_response_too_large``
            (``invalid_response``).
    """
    check_destination(request.url, policy)
    timeout = min(max(request.timeout_seconds, 0.1), MAX_TIMEOUT_SECONDS)
    http = session or requests
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        response = http.request(
            request.method,
            request.url,
            data=request.body,
            headers=signed_headers(request),
            timeout=(min(timeout, 10.0), timeout),
            allow_redirects=False,
            stream=True,
        )
    except requests.Timeout as error:
        # A read timeout means the platform may have received the request.
        sent = not isinstance(error, requests.ConnectTimeout)
        raise EgressError(
            "connection_timeout",
            retryable=True,
            response_class="timeout",
            sent=sent,
            duration_ms=elapsed(),
        ) from error
    except requests.RequestException as error:
        raise EgressError(
            "connection_failed",
            retryable=True,
            response_class="network_error",
            sent=_may_have_been_sent(error),
            duration_ms=elapsed(),
        ) from error
    with response:
        try:
            body = _read_capped(response, policy.max_response_bytes)
        except requests.RequestException as error:
            raise EgressError(
                "connection_failed",
                retryable=True,
                response_class="network_error",
                sent=True,
                status=response.status_code,
                duration_ms=elapsed(),
            ) from error
    status = response.status_code
    if body is None:
        raise EgressError(
            "platform_response_too_large",
            retryable=False,
            response_class="invalid_response",
            sent=True,
            status=status,
            duration_ms=elapsed(),
        )
    digest = sha256_digest(body)
    common = dict(sent=True, status=status, digest=digest, duration_ms=elapsed())
    if 200 <= status < 300:
        return EgressResponse(status=status, body=body, digest=digest, duration_ms=elapsed())
    delay = retry_after_seconds(response.headers.get("Retry-After"))
    if 300 <= status < 400:
        raise EgressError("platform_redirect_refused", retryable=False, response_class="client_error", **common)
    if status == 408:
        raise EgressError(
            "platform_request_timeout", retryable=True, delay_seconds=delay, response_class="client_error", **common
        )
    if status == 429:
        raise EgressError(
            "platform_rate_limited", retryable=True, delay_seconds=delay, response_class="client_error", **common
        )
    if status >= 500:
        raise EgressError(
            "platform_server_error", retryable=True, delay_seconds=delay, response_class="server_error", **common
        )
    raise EgressError("platform_client_error", retryable=False, response_class="client_error", **common)
