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

    def fake_request(method, url, **kwargs):
        seen.update(kwargs)
        raise __import__("requests").ConnectionError("stop here")

    monkeypatch.setattr(egress.requests, "request", fake_request)
    with pytest.raises(EgressError):
        egress.send(request(httpserver.url_for("/x"), timeout=900), policy())
    assert seen["timeout"] == (10.0, 120) and seen["allow_redirects"] is False
