"""Egress policy: allowed hosts, no private or loopback destinations unless allowed,
no redirects, capped responses, timeouts (DLV-4, SPEC §5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from app import egress
from app.egress import EgressError, EgressPolicy, EgressRequest

from .. import scripted as s


def request(url: str, timeout: float = 2) -> EgressRequest:
    return EgressRequest(
        method="POST",
        url=url,
        body=b'{"a":1}',
        message_id="msg_1",
        idempotency_key="op-1",
        timeout_seconds=timeout,
        signing_secret="whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    )


def refused(url, policy) -> EgressError:
    with pytest.raises(EgressError) as caught:
        egress.send(request(url), policy)
    assert caught.value.response_class == "refused" and caught.value.sent is False and not caught.value.retryable
    return caught.value


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/x",
        "http://localhost/x",
        "http://[::1]/x",
        "http://10.1.2.3/x",
        "http://192.168.1.1/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:127.0.0.1]/x",
        "http://0.0.0.0/x",
        "http://100.64.0.1/x",
    ],
)
def test_private_loopback_and_link_local_are_refused(url):
    host = (
        url.split("//")[1].split("/")[0].rsplit(":", 1)[0]
        if not url.split("//")[1].startswith("[")
        else url.split("[")[1].split("]")[0]
    )
    error = refused(url, EgressPolicy(allowed_hosts=(host,), allow_private=False))
    assert error.code == "egress_destination_forbidden"


def test_host_must_be_allowed():
    assert (
        refused("https://api.example.com/x", EgressPolicy(allowed_hosts=("other.example.com",))).code
        == "egress_host_not_allowed"
    )


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "file:///etc/passwd", "http://user:pw@127.0.0.1/x", "http:///x"])
def test_malformed_destinations_are_refused(url):
    assert refused(url, EgressPolicy(allowed_hosts=("127.0.0.1", ""), allow_private=True)).code == "egress_url_invalid"


def policy(**overrides):
    return EgressPolicy(allowed_hosts=("127.0.0.1", "localhost"), allow_private=True, **overrides)


def test_redirects_are_not_followed(httpserver):
    httpserver.expect_request("/go", method="POST").respond_with_handler(
        lambda r: s.redirect("http://169.254.169.254/")(None, r, None)
    )
    with pytest.raises(EgressError) as caught:
        egress.send(request(httpserver.url_for("/go")), policy())
    assert (caught.value.code, caught.value.retryable, caught.value.status) == ("platform_redirect_refused", False, 302)
    assert len(httpserver.log) == 1


def test_response_size_is_capped(httpserver):
    httpserver.expect_request("/big", method="POST").respond_with_data("x" * 5000)
    with pytest.raises(EgressError) as caught:
        egress.send(request(httpserver.url_for("/big")), policy(max_response_bytes=1000))
    assert (caught.value.code, caught.value.response_class) == ("platform_response_too_large", "invalid_response")


@pytest.mark.parametrize(
    ("status", "code"),
    [(503, "platform_server_error"), (429, "platform_rate_limited"), (408, "platform_request_timeout")],
)
def test_dlv6_an_oversized_error_page_of_a_retryable_status_is_still_retried(httpserver, status, code):
    """§5, DLV-6, CONN-2: 408, 429 and 5xx are retried (honouring Retry-After) whatever
    the size of their body: a proxy's big error page during an outage is not a terminal
    ``platform_response_too_large`` (the cap still keeps the body out of memory)."""
    httpserver.expect_request("/big", method="POST").respond_with_data(
        "x" * 5000, status=status, headers={"Retry-After": "7"}
    )
    with pytest.raises(EgressError) as caught:
        egress.send(request(httpserver.url_for("/big")), policy(max_response_bytes=1000))
    error = caught.value
    assert (error.code, error.retryable, error.status, error.delay_seconds) == (code, True, status, 7)


def test_read_timeout_may_have_been_sent(httpserver):
    httpserver.expect_request("/slow", method="POST").respond_with_handler(
        lambda r: s.slow(1.0, s.json_body({}))({}, r, None)
    )
    with pytest.raises(EgressError) as caught:
        egress.send(request(httpserver.url_for("/slow"), timeout=0.3), policy())
    assert (caught.value.code, caught.value.response_class, caught.value.sent, caught.value.retryable) == (
        "connection_timeout",
        "timeout",
        True,
        True,
    )


def test_refused_connection_was_not_sent():
    with pytest.raises(EgressError) as caught:
        egress.send(request("http://127.0.0.1:9/x"), policy())
    assert (caught.value.code, caught.value.response_class, caught.value.sent) == (
        "connection_failed",
        "network_error",
        False,
    )


@pytest.mark.parametrize(
    "status, code, retryable",
    [
        (408, "platform_request_timeout", True),
        (429, "platform_rate_limited", True),
        (500, "platform_server_error", True),
        (503, "platform_server_error", True),
        (400, "platform_client_error", False),
        (404, "platform_client_error", False),
    ],
)
def test_status_classes(httpserver, status, code, retryable):
    """§5: 408, 429 and 5xx are retryable; other 4xx are terminal."""
    httpserver.expect_request("/s", method="POST").respond_with_data("{}", status=status)
    with pytest.raises(EgressError) as caught:
        egress.send(request(httpserver.url_for("/s")), policy())
    assert (caught.value.code, caught.value.retryable, caught.value.status) == (code, retryable, status)


def test_retry_after_forms():
    assert egress.retry_after_seconds("120") == 120
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 85 <= egress.retry_after_seconds(later) <= 91
    assert egress.retry_after_seconds("soon", default=15) == 15
    assert egress.retry_after_seconds(None, default=15) == 15


def test_signed_headers_follow_standard_webhooks():
    from standardwebhooks import Webhook

    req = request("http://127.0.0.1/x")
    headers = egress.signed_headers(req)
    assert headers["Idempotency-Key"] == "op-1" and headers["webhook-id"] == "msg_1"
    Webhook(req.signing_secret).verify(req.body.decode(), headers)


def test_connection_timeout_is_capped_at_120_seconds(monkeypatch, httpserver):
    seen = {}

    def fake_request(session, method, url, **kwargs):
        seen.update(kwargs)
        raise __import__("requests").ConnectionError("stop here")

    monkeypatch.setattr(egress.requests.Session, "request", fake_request)
    with pytest.raises(EgressError):
        egress.send(request(httpserver.url_for("/x"), timeout=900), policy())
    connect, read = seen["timeout"]  # read: what is left of the whole request's 120 s
    assert connect == 10.0 and 119 < read <= 120 and seen["allow_redirects"] is False


# --- SEC-2: the vetted address is the one connected to; IPv6 embeddings refused ----


@pytest.mark.parametrize(
    "host",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "::127.0.0.1",  # IPv4-compatible
        "::ffff:0:7f00:1",  # SIIT (IPv4-translated) 127.0.0.1
        "::ffff:0:a00:1",  # SIIT 10.0.0.1
        "::ffff:10.0.0.1",  # IPv4-mapped
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    ],
)
def test_ipv6_forms_embedding_a_private_ipv4_are_refused(host):
    """SEC-2: NAT64, 6to4, IPv4-compatible, IPv4-mapped and SIIT forms of a private,
    loopback or link-local IPv4 address are private too."""
    error = refused(f"http://[{host}]/x", EgressPolicy(allowed_hosts=(host,), allow_private=False))
    assert error.code == "egress_destination_forbidden"


@pytest.mark.parametrize(
    "host",
    [
        "64:ff9b:1::808:808",  # local-use NAT64 prefix (RFC 8215), even with a public IPv4 in it
        "64:ff9b:1:ffff::1",
        "100:0:0:1::1",  # dummy IPv6 prefix (RFC 9780)
        "3fff::1",  # documentation (RFC 9637)
        "5f00::1",  # SRv6 SIDs (RFC 9602)
        "fec0::1",  # site-local, deprecated (RFC 3879)
        "192.88.99.1",  # 6to4 relay anycast, deprecated (RFC 7526)
        "::ffff:192.88.99.1",
    ],
)
def test_four10_special_purpose_ranges_python_calls_global_are_refused(host):
    """SEC-2, FOUR-10 (issue 22): the special-purpose ranges of IANA's registries that
    Python's `ipaddress` still reports as global are refused like the others; the
    local-use NAT64 prefix 64:ff9b:1::/48 was let through."""
    literal = f"[{host}]" if ":" in host else host
    error = refused(f"http://{literal}/x", EgressPolicy(allowed_hosts=(host,), allow_private=False))
    assert error.code == "egress_destination_forbidden"


@pytest.mark.parametrize("host", ["64:ff9b::808:808", "2002:808:808::1"])
def test_ipv6_forms_embedding_a_public_ipv4_pass_the_address_check(host):
    """SEC-2: only embeddings of non-public addresses are refused."""
    assert egress.check_destination(f"http://[{host}]/x", EgressPolicy(allowed_hosts=(host,))) == [host]


def test_a_name_that_answers_loopback_the_second_time_never_reaches_it(monkeypatch, httpserver):
    """SEC-2 (DNS rebinding): the name answers a public address when vetted and
    127.0.0.1 afterwards; the request goes to the vetted address or nowhere, and the
    bearer token never reaches loopback."""
    import socket

    real = socket.getaddrinfo
    port = httpserver.port
    httpserver.expect_request("/x").respond_with_json({"status": "applied"})
    asked = []

    def rebinding(host, *args, **kwargs):
        asked.append(host)
        if host == "rebind.example":
            address = "93.184.216.34" if asked.count(host) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        if host == "93.184.216.34":  # the pinned connection: stop it here, nothing leaves the machine
            raise socket.gaierror(socket.EAI_NONAME, "test: not connecting out")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with pytest.raises(EgressError) as caught:
        egress.send(
            EgressRequest(
                method="POST",
                url=f"http://rebind.example:{port}/x",
                body=b"{}",
                message_id="msg_1",
                idempotency_key="op-1",
                timeout_seconds=2,
                bearer_token="secret-token",
            ),
            EgressPolicy(allowed_hosts=("rebind.example",), allow_private=False),
        )
    assert (caught.value.code, caught.value.sent) == ("connection_failed", False)
    assert httpserver.log == []
    assert asked == ["rebind.example", "93.184.216.34"]  # resolved once, then connected to what was vetted


def test_the_connection_is_pinned_to_the_vetted_address_and_keeps_the_name(httpserver):
    """SEC-2: with an injected resolver whose second answer differs, the request still
    reaches the first (vetted) address, and the platform sees its own name as Host."""
    port = httpserver.port
    httpserver.expect_request("/x", method="POST").respond_with_json({"status": "applied"})
    answers = iter([["127.0.0.1"], ["192.0.2.99"]])
    calls = []

    def resolver(host, port):
        calls.append((host, port))
        return next(answers)

    response = egress.send(
        request(f"http://platform.example:{port}/x"),
        EgressPolicy(allowed_hosts=("platform.example",), allow_private=True),
        resolver=resolver,
    )
    assert response.status == 200
    assert calls == [("platform.example", port)]
    [(sent, _)] = httpserver.log
    assert sent.headers["Host"] == f"platform.example:{port}"


def test_a_pinned_session_is_re_pinned_when_the_vetted_address_changes(httpserver):
    """SEC-2: a reused session connects to each request's own vetted address."""
    import requests

    httpserver.expect_request("/x", method="POST").respond_with_json({})
    session = requests.Session()
    ok = EgressPolicy(allowed_hosts=("platform.example",), allow_private=True)
    url = f"http://platform.example:{httpserver.port}/x"
    assert egress.send(request(url), ok, session=session, resolver=lambda h, p: ["127.0.0.1"]).status == 200
    with pytest.raises(EgressError) as caught:  # the server listens on 127.0.0.1 only
        egress.send(request(url), ok, session=session, resolver=lambda h, p: ["127.0.0.3"])
    assert caught.value.code == "connection_failed" and len(httpserver.log) == 1


def test_every_vetted_address_is_tried_until_one_connects(httpserver):
    """SEC-2: a name with several vetted addresses falls back to the next when a
    connection cannot be made (nothing was sent), never to an unvetted one."""
    httpserver.expect_request("/x", method="POST").respond_with_json({})
    response = egress.send(
        request(f"http://platform.example:{httpserver.port}/x"),
        EgressPolicy(allowed_hosts=("platform.example",), allow_private=True),
        resolver=lambda host, port: ["127.0.0.3", "127.0.0.1"],
    )
    assert response.status == 200 and len(httpserver.log) == 1


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An HTTPS server on 127.0.0.1 with a self-signed certificate for platform.example."""
    import ssl
    import subprocess

    from pytest_httpserver import HTTPServer

    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
        + ["-days", "1", "-subj", "/CN=platform.example", "-addext", "subjectAltName=DNS:platform.example"],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = HTTPServer(host="127.0.0.1", port=0, ssl_context=context)
    server.start()
    server.expect_request("/x").respond_with_json({"ok": True})
    yield server, str(cert)
    server.clear()
    server.stop()


def test_tls_is_checked_against_the_name_not_the_pinned_address(tls_server):
    """SEC-2: pinned to 127.0.0.1, the certificate is verified for the URL's host name
    (SNI and hostname check); a name the certificate does not cover fails."""
    import requests

    server, ca = tls_server
    session = requests.Session()
    session.mount("https://platform.example:", egress.PinnedAdapter("127.0.0.1"))
    assert session.get(f"https://platform.example:{server.port}/x", verify=ca).json() == {"ok": True}
    session.mount("https://other.example:", egress.PinnedAdapter("127.0.0.1"))
    with pytest.raises(requests.exceptions.SSLError):
        session.get(f"https://other.example:{server.port}/x", verify=ca)


# --- SEC-3: a reference is a path under the base URL ---------------------------------


@pytest.mark.parametrize(
    "base, path, url",
    [
        ("https://p.example/api", "/actions/x", "https://p.example/api/actions/x"),
        ("https://p.example/api/", "/actions/x", "https://p.example/api/actions/x"),
        ("https://p.example", "/actions", "https://p.example/actions"),
        ("https://p.example:8443/v1", "/items:batch", "https://p.example:8443/v1/items:batch"),
        ("https://p.example/api", "/x:y", "https://p.example/api/x:y"),  # the old join read "x:" as a scheme
    ],
)
def test_a_reference_joins_as_a_path_under_the_base_url(base, path, url):
    """SEC-3"""
    assert egress.build_url(base, path) == url


@pytest.mark.parametrize(
    "path",
    [
        "/http://127.0.0.1:6379/x",
        "http://127.0.0.1:6379/x",
        "//127.0.0.1:6379/x",
        "/../admin",
        "/a/%2e%2e/admin",
        "/a?b=1",
        "/a#b",
        "/a\\b",
        "",
    ],
)
def test_a_reference_that_could_leave_the_base_url_is_refused(path):
    """SEC-3: it can never change the scheme, host, port or base path."""
    from app.domain.errors import ActionError

    with pytest.raises(ActionError) as caught:
        egress.build_url("https://p.example/api", path)
    assert caught.value.code == "action_component_operation_invalid"


# --- issue 14: the whole request ends within the timeout ---------------------------


@pytest.fixture
def trickling():
    server = s.TricklingPlatform(pieces=4, gap=1.0)
    yield server
    server.close()


def test_a_body_trickled_past_the_timeout_is_a_timeout(trickling):
    """DLV-4: the timeout bounds the whole request (connect, send, every read), not
    each read: headers at once, then the body in pieces 1 s apart, never a read
    longer than the 2 s timeout, and still the request ends as a timeout at 2 s:
    the client hangs up while the platform is still sending (at 3 s it would have
    the whole answer)."""
    with pytest.raises(EgressError) as caught:
        egress.send(request(trickling.url + "x", timeout=2), policy())
    assert (caught.value.code, caught.value.response_class, caught.value.sent, caught.value.retryable) == (
        "connection_timeout",
        "timeout",
        True,
        True,
    )
    assert caught.value.duration_ms >= 1900  # not before its time (a busy machine only makes it later)
    [answer] = trickling.requests
    assert answer["done"].wait(10)
    assert answer["hung_up"] and 1 <= answer["pieces_sent"] < trickling.pieces, answer


def test_a_body_trickled_within_the_timeout_arrives_whole(trickling):
    """DLV-4: a slow answer that ends in time is read in full."""
    trickling.gap = 0.2
    response = egress.send(request(trickling.url + "x", timeout=2), policy())
    assert response.status == 200 and response.body.endswith(b"}")


def test_dlv6_retry_after_of_non_ascii_digits_or_odd_values_is_a_delay_never_an_error():
    """DLV-6: ``²`` (a digit to `str.isdigit`, not to `float`) and other odd values give
    the default or a number; reading the header never raises."""
    assert egress.retry_after_seconds("\u00b2", default=15) == 15
    assert egress.retry_after_seconds("-5", default=15) == 15
    assert egress.retry_after_seconds("Fri, 31 Dec 9999 23:59:59 GMT") > 21_600  # clamped by DLV-6 and CONN-2
