"""Canonical JSON and digests (ID-2, AUD-1), time, and the error types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.domain import clock
from app.domain.digests import canonical_json, json_digest, json_problem, sha256_digest, sha256_hex
from app.domain.errors import ActionError, ApiError
from app.domain.receipts import ProposalIdentity, parse_receipt


def test_canonical_json_and_digests():
    """ID-2: RFC 8785 text, UTF-8, hex SHA-256."""
    assert canonical_json({"é": "ü", "a": [1.0, 2]}) == '{"a":[1,2],"é":"ü"}'
    assert sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex(b"") == sha256_hex("")
    assert sha256_hex("é") == sha256_hex("é".encode())
    assert sha256_digest("") == "sha256:" + sha256_hex("")
    assert json_digest({"b": 1, "a": 2}) == sha256_digest('{"a":2,"b":1}')


def test_json_problem_accepts_ordinary_values():
    assert json_problem({"a": [1, "x", None, True, 1.5, {"b": {}}]}) is None
    nested = {"a": [[1]]}  # the 1 sits at level 4
    assert json_problem(nested, max_depth=4) is None
    assert json_problem(nested, max_depth=3) == "nested deeper than 3 levels"


@pytest.mark.parametrize(
    "value, problem",
    [
        ({"a": [[1]]}, "nested deeper than 2 levels"),
        ({"a": {"b": {}}}, "nested deeper than 2 levels"),
        ({"a\x00": 1}, "a string holds a NUL or an unpaired surrogate"),
        ({"a": "x\x00"}, "a string holds a NUL or an unpaired surrogate"),
        (["\ud800"], "a string holds a NUL or an unpaired surrogate"),
    ],
)
def test_json_problem_names_what_cannot_be_stored(value, problem):
    assert json_problem(value, max_depth=2) == problem


@pytest.mark.parametrize(
    "value, kind",
    [(float("nan"), "FloatDomainError"), ({"a": float("inf")}, "FloatDomainError"), (2**60, "IntegerDomainError")],
)
def test_json_problem_refuses_what_rfc_8785_cannot_hold(value, kind):
    assert json_problem(value) == f"not representable as canonical JSON ({kind})"


def test_json_depth_default():
    deep = inner = {}
    for _ in range(31):
        inner["a"] = {}
        inner = inner["a"]
    assert json_problem(deep) is None
    inner["a"] = {}
    assert json_problem(deep) == "nested deeper than 32 levels"


def test_clock():
    """ISO-8601 UTC with milliseconds and Z; any offset in, aware UTC out."""
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert clock.iso(moment) == "2026-01-02T03:04:05.678Z"
    assert clock.iso(None) is None
    assert clock.iso(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"  # naive reads as UTC
    plus_two = moment.astimezone(timezone(timedelta(hours=2)))
    assert clock.iso(plus_two) == "2026-01-02T03:04:05.678Z"
    assert clock.parse_iso("2026-01-02T03:04:05.678Z") == datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    parsed = clock.parse_iso("2026-01-02T05:04:05+02:00")
    assert parsed == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC) and parsed.tzinfo == UTC
    naive = clock.parse_iso("2026-01-02T03:04:05")
    assert naive.tzinfo == UTC and naive.hour == 3
    with pytest.raises(ValueError):
        clock.parse_iso("yesterday")
    now = clock.utcnow()
    assert now.tzinfo == UTC and abs((datetime.now(UTC) - now).total_seconds()) < 5
    assert clock.seconds_from_now(30, moment) == moment + timedelta(seconds=30)
    assert 29 < (clock.seconds_from_now(30) - clock.utcnow()).total_seconds() <= 30


def test_action_error():
    error = ActionError("action_precondition_changed")
    assert (error.code, error.retryable, error.delay_seconds, str(error)) == (
        "action_precondition_changed",
        False,
        15,
        "action_precondition_changed",
    )
    retry = ActionError("platform_server_error", True, 40)
    assert (retry.retryable, retry.delay_seconds) == (True, 40)


def test_api_error():
    error = ApiError(409, "idempotency_key_reused", "Used before.", "idempotency_key")
    assert (error.status, error.code, error.message, error.field) == (
        409,
        "idempotency_key_reused",
        "Used before.",
        "idempotency_key",
    )
    assert str(error) == "idempotency_key_reused: Used before."
    assert error.as_dict() == {
        "error": {"code": "idempotency_key_reused", "message": "Used before.", "field": "idempotency_key"}
    }
    assert ApiError(400, "x", "y").as_dict() == {"error": {"code": "x", "message": "y"}}
    assert ApiError(400, "x", "y").field is None


IDENTITY = ProposalIdentity("a", "o", "sha256:d")


def test_receipt_bounds_and_fields():
    """RCPT-1: retry_after 1..21,600 and provider_request_id up to 500 characters."""
    base = {"action_id": "a", "operation_id": "o", "payload_digest": "sha256:d", "status": "failed"}
    for seconds in (1, 21_600):
        assert parse_receipt({**base, "retry_after_seconds": seconds}, IDENTITY).retry_after_seconds == seconds
    assert parse_receipt({**base, "provider_request_id": "p" * 500}, IDENTITY).provider_request_id == "p" * 500
    receipt = parse_receipt(base, IDENTITY)
    assert (receipt.action_id, receipt.operation_id, receipt.payload_digest, receipt.status) == (
        "a",
        "o",
        "sha256:d",
        "failed",
    )
    assert receipt.as_dict() == {
        "action_id": "a",
        "operation_id": "o",
        "payload_digest": "sha256:d",
        "status": "failed",
        "terminal": True,
        "error_code": "action_provider_failed",
        "retry_after_seconds": 30,
        "provider_request_id": None,
    }


@pytest.fixture
def server_in_kolkata(monkeypatch):
    """The process's local time zone set to UTC+05:30 (restored afterwards)."""
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_clock_is_utc_whatever_the_servers_time_zone(server_in_kolkata):
    """Naive times read as UTC and aware ones come out in UTC, not in the server's local zone."""
    assert datetime(2026, 1, 2, 3, 4, 5).astimezone().utcoffset() == timedelta(hours=5, minutes=30)  # the zone took
    assert clock.iso(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"
    assert clock.iso(datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))) == "2026-01-02T03:04:05.000Z"
    parsed = clock.parse_iso("2026-01-02T05:04:05+02:00")
    assert parsed.tzinfo is UTC and parsed.hour == 3
    naive = clock.parse_iso("2026-01-02T03:04:05")
    assert naive.tzinfo is UTC and naive.hour == 3
