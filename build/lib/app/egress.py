"""The HTTP call to a platform: destination policy, signing, timeouts, size cap.

This module knows nothing of the database: it turns an `EgressRequest` into an
`EgressResponse` or raises `EgressError` with the attempt's response class. The
delivery service records both in the connection_attempts table.

Policy (SPEC DLV-4, §5, SEC-2, SEC-3): the host must be one of the connection's
allowed hosts; loopback, private, link-local and other non-public addresses are
refused unless the configuration allows them, also when an IPv6 address embeds one
(NAT64, 6to4, IPv4-compatible, IPv4-mapped, SIIT); the name is resolved once and the
request connects to an address that was vetted (`PinnedAdapter`), never to what a
second lookup answers; redirects are never followed; the response body is read up
to a cap; the connection's timeout (at most 120 s) bounds the whole request —
connect, send and every read — not each read (`Deadline`).
"""

from __future__ import annotations

import contextlib
import heapq
import ipaddress
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from standardwebhooks import Webhook
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.ssl_match_hostname import CertificateError

from app.domain.digests import sha256_digest
from app.domain.errors import ActionError
from app.domain.states import MAX_TIMEOUT_SECONDS

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
        body: the answer's body for an HTTP error status (capped), else None.
        detail: a short reason in words for the attempt row (the TLS verifier's
            reason for ``tls_certificate_invalid``), else None.
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
        body: bytes | None = None,
        detail: str | None = None,
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
        self.body = body  # the (capped) answer of a non-2xx status: platform kinds read it (PLAT-2, PLAT-3)
        self.detail = detail


# A reference's path: URL path characters only (no "?", "#" or backslash), no empty
# segment ("//" starts another authority) and no ".." (plain or percent-encoded).
_REFERENCE_PATH = re.compile(r"^(?!.*(?://|/\.\.(?:/|$)|%2[eE]))/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")


def build_url(base_url: str, path: str) -> str:
    """The operation's URL: `path` appended to the base URL's path (SEC-3).

    The reference is a path under the base URL, never a URL of its own: the result
    keeps the base's scheme, host and port, and its path starts with the base path.

    Args:
        base_url: the connection's base URL, e.g. ``https://platform.example/api``.
        path: the reference's path, e.g. ``/actions/takedown``.

    Raises:
        ActionError: ``action_component_operation_invalid`` for any other path.
    """
    if not isinstance(path, str) or not _REFERENCE_PATH.match(path):
        raise ActionError("action_component_operation_invalid")
    base = urlsplit(base_url)
    base_path = base.path.rstrip("/")
    url = urlunsplit((base.scheme, base.netloc, base_path + path, "", ""))
    joined = urlsplit(url)
    if (joined.scheme, joined.netloc) != (base.scheme, base.netloc) or not joined.path.startswith(base_path + "/"):
        raise ActionError("action_component_operation_invalid")
    return url


Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses of `host`, in the order the system prefers them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


# IPv6 ranges whose last 32 bits (or, for 6to4, bits 16..48) are an IPv4 address.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped or ip.sixtofour:
        return ip.ipv4_mapped or ip.sixtofour
    if ip in _NAT64 or ip in _SIIT or ip in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


# Special-purpose ranges (IANA's IPv4 and IPv6 special-purpose address registries, and
# deprecated ones) that Python's `ipaddress` still calls global: no platform is there.
_SPECIAL_RANGES = tuple(
    ipaddress.ip_network(network)
    for network in (
        "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation (RFC 8215): a NAT64 of your own network
        "100:0:0:1::/64",  # dummy IPv6 prefix (RFC 9780)
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing (SRv6) SIDs (RFC 9602)
        "fec0::/10",  # site-local, deprecated (RFC 3879)
        "192.88.99.0/24",  # 6to4 relay anycast, deprecated (RFC 7526)
    )
)


def _special(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return any(ip.version == network.version and ip in network for network in _SPECIAL_RANGES)


def forbidden_address(address: str) -> bool:
    """Whether egress refuses `address`: not global, multicast, in a special-purpose
    range of `_SPECIAL_RANGES` (local-use NAT64 64:ff9b:1::/48...), or an IPv6 form
    that embeds such an IPv4 address (SEC-2, FOUR-10)."""
    ip = ipaddress.ip_address(address)
    if _special(ip):
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        ip = _embedded_ipv4(ip) or ip
    return not ip.is_global or ip.is_multicast or _special(ip)


def check_destination(url: str, policy: EgressPolicy, resolver: Resolver = system_resolver) -> list[str]:
    """Refuse a destination the policy does not allow; return its vetted addresses.

    Args:
        url: the request's URL.
        policy: allowed hosts and the private-address switch.
        resolver: (host, port) -> addresses; the system's by default.

    Returns:
        The host's addresses in the resolver's order: the only ones `send` connects to.

    Raises:
        EgressError: ``egress_url_invalid``, ``egress_host_not_allowed`` or
            ``egress_destination_forbidden`` (class ``refused``, nothing sent);
            ``connection_failed`` when the name does not resolve.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise EgressError("egress_url_invalid", retryable=False, response_class="refused", sent=False)
    allowed = {h.lower() for h in policy.allowed_hosts}
    if host not in allowed:
        raise EgressError("egress_host_not_allowed", retryable=False, response_class="refused", sent=False)
    try:
        addresses = list(dict.fromkeys(resolver(host, parts.port or (443 if parts.scheme == "https" else 80))))
    except (OSError, UnicodeError) as error:
        raise EgressError("connection_failed", retryable=True, response_class="network_error", sent=False) from error
    if not addresses:
        raise EgressError("connection_failed", retryable=True, response_class="network_error", sent=False)
    if not policy.allow_private and any(forbidden_address(a) for a in addresses):
        raise EgressError("egress_destination_forbidden", retryable=False, response_class="refused", sent=False)
    return addresses


class Deadline:
    """The moment a request must have ended by, enforced on its socket.

    A socket timeout bounds each read, so a platform that trickles its answer could
    hold a request open for ever, one short read after another (issue 14). When the
    deadline passes, the watchdog shuts the request's connection down: whatever read
    or write is blocked returns at once, and `expired` tells the caller that what it
    read (perhaps a body cut short) is a timeout, not an answer.

    Args:
        seconds: from now until the deadline.
    """

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.expired = False
        self._socket = None
        self._lock = threading.Lock()
        self._done = False

    def left(self) -> float:
        """Seconds until the deadline (0 when past)."""
        return max(self.at - time.monotonic(), 0.0)

    def watch(self, sock) -> None:
        """The socket the request uses (a new connection's, or a reused one's)."""
        with self._lock:
            self._socket = sock
            late = self.expired
        if late:
            self._shut()

    def expire(self) -> None:
        """Called by the watchdog at the deadline."""
        with self._lock:
            if self._done:
                return
            self.expired = True
        self._shut()

    def finish(self) -> bool:
        """The request ended; True when it ended because the deadline passed."""
        with self._lock:
            self._done = True
            return self.expired

    def _shut(self) -> None:
        sock = self._socket
        if sock is not None:
            # At the file descriptor (for TLS too, under the SSL object another thread
            # may be reading through): the blocked call fails at once. OSError: closed.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """One thread per process that expires `Deadline`s when their time comes (a
    thread per request would cost more than the request's own bookkeeping)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._wake = threading.Condition()
        self._pid: int | None = None
        self._count = 0

    def arm(self, deadline: Deadline) -> None:
        with self._wake:
            if self._pid != os.getpid():  # first use, or a forked child: the thread did not come along
                self._heap, self._pid = [], os.getpid()
                threading.Thread(target=self._run, name="egress-watchdog", daemon=True).start()
            self._count += 1
            heapq.heappush(self._heap, (deadline.at, self._count, deadline))
            if self._heap[0][2] is deadline:
                self._wake.notify()

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._wake:
                if self._pid != pid:
                    return
                while self._heap and self._heap[0][2]._done:  # finished in time: forget it
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                _, _, due = heapq.heappop(self._heap)
            due.expire()


_watchdog = _Watchdog()
_current = threading.local()  # the Deadline of the request this thread is sending


def _watch(sock) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.watch(sock)


class _WatchedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _watch(self.sock)


class _WatchedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _watch(self.sock)


class _Watched:
    """A pool mixin that shows the current request's deadline the socket it will use
    (a reused connection's here, a new one's when it connects)."""

    def _get_conn(self, timeout=None):
        connection = super()._get_conn(timeout)
        _watch(getattr(connection, "sock", None))
        return connection


class _WatchedPool(_Watched, HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(_Watched, HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class PinnedAdapter(HTTPAdapter):
    """A transport adapter whose connections go to one vetted address (SEC-2).

    The URL keeps the host name: it is sent as ``Host``, as the TLS server name
    (SNI) and checked against the certificate. No proxy is used, since a proxy would
    resolve the name again.

    Args:
        address: the IP address to connect to (IPv4 or IPv6, no brackets).
    """

    def __init__(self, address: str, **kwargs) -> None:
        self.address = address
        super().__init__(**kwargs)

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = host_params["host"]
            pool_kwargs["assert_hostname"] = host_params["host"]
        host_params["host"] = self.address
        return host_params, pool_kwargs

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
        return super().get_connection_with_tls_context(request, verify, proxies=None, cert=cert)

    def request_url(self, request, proxies) -> str:
        return request.path_url

    def add_headers(self, request, **kwargs) -> None:
        request.headers["Host"] = urlsplit(request.url).netloc


def _pin(session: requests.Session, url: str, address: str) -> None:
    """Mount on `session` an adapter for the URL's origin that connects to `address`."""
    parts = urlsplit(url)
    prefix = f"{parts.scheme}://{parts.netloc}/".lower()
    current = session.adapters.get(prefix)
    if isinstance(current, PinnedAdapter) and current.address == address:
        return
    if current is not None:
        current.close()
    session.mount(prefix, PinnedAdapter(address))


def retry_after_seconds(value: str | None, default: float = 15) -> float:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); `default` for
    anything else. Delta-seconds are ASCII digits only: ``²`` is a digit to
    `str.isdigit` but not to `float` (DLV-6)."""
    if not value:
        return default
    value = value.strip()
    if value.isascii() and value.isdigit():
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


TLS_CERTIFICATE_INVALID = "tls_certificate_invalid"
TLS_HANDSHAKE_FAILED = "tls_handshake_failed"
MAX_DETAIL = 200


def tls_failure(error: requests.RequestException) -> tuple[str, str] | None:
    """The TLS failure behind a request error, as (code, the verifier's reason), or
    None when it was not TLS (DLV-4).

    A certificate that does not verify (self-signed, expired, for another name,
    unknown issuer) is ``tls_certificate_invalid``; any other TLS error before the
    request went out is ``tls_handshake_failed``. Either way nothing was sent.
    """
    if not isinstance(error, requests.exceptions.SSLError):
        return None
    cause = error.args[0] if error.args else None
    cause = getattr(cause, "reason", cause)  # urllib3's MaxRetryError -> its SSLError
    inner = cause.args[0] if isinstance(cause, urllib3.exceptions.SSLError) and cause.args else cause
    if isinstance(inner, ssl.SSLCertVerificationError) and getattr(inner, "verify_message", None):
        return TLS_CERTIFICATE_INVALID, inner.verify_message[:MAX_DETAIL]
    if isinstance(inner, CertificateError | ssl.CertificateError):  # urllib3's own host name check
        return TLS_CERTIFICATE_INVALID, f"hostname mismatch: {inner}"[:MAX_DETAIL]
    return TLS_HANDSHAKE_FAILED, str(inner or error)[:MAX_DETAIL]


def _read_capped(response: requests.Response, limit: int) -> bytes | None:
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def send(
    request: EgressRequest,
    policy: EgressPolicy,
    session: requests.Session | None = None,
    resolver: Resolver = system_resolver,
) -> EgressResponse:
    """Send one attempt and return its 2xx response.

    The host is resolved once; the request connects to a vetted address (the next
    one only when a connection could not be made, so nothing was sent), with the
    host name kept for ``Host`` and TLS (SEC-2).

    Args:
        request: what to send; ``timeout_seconds`` (capped at 120) bounds the whole
            request: connecting, sending and reading every byte of the answer.
        policy: allowed hosts, private-address switch, response size cap (bytes).
        session: a `requests.Session` to reuse connections (optional; one per
            thread, since pinned adapters are mounted on it per origin).
        resolver: (host, port) -> addresses; the system's by default.

    Raises:
        EgressError: refused destinations (``refused``); ``connection_timeout``
            (``timeout``); ``connection_failed`` (``network_error``);
            ``platform_redirect_refused``, ``platform_client_error``,
            ``platform_request_timeout``, ``platform_rate_limited``,
            ``platform_server_error`` (HTTP classes, 408/429/5xx retryable and
            honouring Retry-After); ``platform_response_too_large``
            (``invalid_response``); ``tls_certificate_invalid`` or
            ``tls_handshake_failed`` (``tls_error``, retryable, nothing sent, the
            verifier's reason in ``detail``).
    """
    addresses = check_destination(request.url, policy, resolver)
    http = session or requests.Session()
    # One deadline for the whole request, whichever address it ends up using.
    deadline = Deadline(min(max(request.timeout_seconds, 0.1), MAX_TIMEOUT_SECONDS))
    _watchdog.arm(deadline)
    try:
        for address in addresses[:-1]:
            try:
                return _send_pinned(http, address, request, policy, deadline)
            except EgressError as error:
                if error.sent:
                    raise
        return _send_pinned(http, addresses[-1], request, policy, deadline)
    finally:
        deadline.finish()
        if session is None:
            http.close()


def _timed_out(sent: bool, started: float, status: int | None = None) -> EgressError:
    return EgressError(
        "connection_timeout",
        retryable=True,
        response_class="timeout",
        sent=sent,
        status=status,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def _send_pinned(
    http: requests.Session, address: str, request: EgressRequest, policy: EgressPolicy, deadline: Deadline
) -> EgressResponse:
    _pin(http, request.url, address)
    left = max(deadline.left(), 0.001)
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    _current.deadline = deadline
    try:
        response = http.request(
            request.method,
            request.url,
            data=request.body,
            headers=signed_headers(request),
            timeout=(min(left, 10.0), left),
            allow_redirects=False,
            stream=True,
        )
    except requests.Timeout as error:
        # A read timeout means the platform may have received the request.
        raise _timed_out(not isinstance(error, requests.ConnectTimeout), started) from error
    except requests.RequestException as error:
        if deadline.expired:  # the watchdog cut the connection while the request was going out
            raise _timed_out(True, started) from error
        tls = tls_failure(error)
        if tls is not None:  # the handshake failed: no byte of the request left (retried, counts: CONN-1)
            raise EgressError(
                tls[0],
                retryable=True,
                response_class="tls_error",
                sent=False,
                duration_ms=elapsed(),
                detail=tls[1],
            ) from error
        raise EgressError(
            "connection_failed",
            retryable=True,
            response_class="network_error",
            sent=_may_have_been_sent(error),
            duration_ms=elapsed(),
        ) from error
    finally:
        _current.deadline = None
    with response:
        try:
            body = _read_capped(response, policy.max_response_bytes)
        except requests.RequestException as error:
            if deadline.expired:
                raise _timed_out(True, started, response.status_code) from error
            raise EgressError(
                "connection_failed",
                retryable=True,
                response_class="network_error",
                sent=True,
                status=response.status_code,
                duration_ms=elapsed(),
            ) from error
    if deadline.expired:  # what was read may be cut short: the answer did not arrive in time
        raise _timed_out(True, started, response.status_code)
    status = response.status_code
    # 408, 429 and 5xx are retried whatever their body's size (a proxy's big error page
    # during an outage); any other answer too large to read is terminal (§5, DLV-6).
    if body is None and not (status in (408, 429) or status >= 500):
        raise EgressError(
            "platform_response_too_large",
            retryable=False,
            response_class="invalid_response",
            sent=True,
            status=status,
            duration_ms=elapsed(),
        )
    digest = sha256_digest(body) if body is not None else None
    common = dict(sent=True, status=status, digest=digest, duration_ms=elapsed(), body=body)
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
