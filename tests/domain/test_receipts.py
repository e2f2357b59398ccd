"""Receipt parsing (RCPT-1) and its normalisation (RCPT-2)."""

import pytest

from app.domain.errors import ActionError
from app.domain.receipts import ProposalIdentity, parse_receipt

IDENTITY = ProposalIdentity("run_1:node:main:proposal", "action:run_1:node:main:key12345", "sha256:" + "a" * 64)


def receipt(**changes):
    value = {
        "action_id": IDENTITY.action_id,
        "operation_id": IDENTITY.operation_id,
        "payload_digest": IDENTITY.payload_digest,
        "status": "applied",
    }
    value.update(changes)
    return {k: v for k, v in value.items() if v is not None}


@pytest.mark.parametrize("field", ["action_id", "operation_id", "payload_digest"])
def test_receipt_must_name_the_proposal_exactly(field):
    """RCPT-1: another action, operation or digest is an identity mismatch."""
    with pytest.raises(ActionError) as caught:
        parse_receipt(receipt(**{field: "something-else"}), IDENTITY)
    assert caught.value.code == "action_result_identity_mismatch"


@pytest.mark.parametrize("status", ["done", "", 1, None])
def test_status_must_be_known(status):
    """RCPT-1: an unknown status asks for a confirmation."""
    value = receipt()
    value["status"] = status
    with pytest.raises(ActionError) as caught:
        parse_receipt(value, IDENTITY)
    assert caught.value.code == "action_confirmation_required"


@pytest.mark.parametrize(
    "changes",
    [
        {"terminal": "yes"},
        {"retry_after_seconds": 0},
        {"retry_after_seconds": 21_601},
        {"retry_after_seconds": 2.5},
        {"retry_after_seconds": True},
        {"error_code": "has space"},
        {"error_code": "x" * 201},
        {"error_code": 5},
        {"provider_request_id": "x" * 501},
        {"provider_request_id": 7},
    ],
)
def test_malformed_optional_fields_are_invalid(changes):
    """RCPT-1: optional fields have exact shapes."""
    with pytest.raises(ActionError) as caught:
        parse_receipt(receipt(status="failed", **changes), IDENTITY)
    assert caught.value.code == "action_result_invalid"


def test_not_an_object_is_invalid():
    with pytest.raises(ActionError) as caught:
        parse_receipt(["applied"], IDENTITY)
    assert caught.value.code == "action_result_invalid"


def test_defaults_and_terminality():
    """RCPT-1, RCPT-2: failed is terminal unless terminal=false; defaults fill in."""
    failed = parse_receipt(receipt(status="failed"), IDENTITY)
    assert (failed.terminal, failed.error_code, failed.retry_after_seconds) == (True, "action_provider_failed", 30)
    retry = parse_receipt(
        receipt(status="failed", terminal=False, retry_after_seconds=90, error_code="rate.limited:x"), IDENTITY
    )
    assert (retry.terminal, retry.error_code, retry.retry_after_seconds) == (False, "rate.limited:x", 90)
    applied = parse_receipt(receipt(status="applied", terminal=False, error_code="ignored"), IDENTITY)
    assert (applied.terminal, applied.error_code) == (True, None)
    accepted = parse_receipt(receipt(status="accepted", provider_request_id="p-1"), IDENTITY)
    assert (accepted.terminal, accepted.provider_request_id) == (False, "p-1")


@pytest.mark.parametrize("value, expected", [(30.0, 30), (1.0, 1), (21_600.0, 21_600)])
def test_integer_fields_accept_integer_valued_numbers(value, expected):
    """EDGE-1: ``retry_after_seconds: 30.0`` is the integer 30, not an invalid receipt."""
    parsed = parse_receipt(receipt(status="failed", terminal=False, retry_after_seconds=value), IDENTITY)
    assert parsed.retry_after_seconds == expected and isinstance(parsed.retry_after_seconds, int)
    assert parsed.terminal is False


@pytest.mark.parametrize("value", [30.5, 0.0, 21_601.0, float("inf"), "30", True])
def test_integer_fields_refuse_other_numbers(value):
    """EDGE-1: a fraction, an out-of-range float, a string or a boolean is not an integer."""
    with pytest.raises(ActionError) as caught:
        parse_receipt(receipt(status="failed", retry_after_seconds=value), IDENTITY)
    assert caught.value.code == "action_result_invalid"


@pytest.mark.parametrize("code", ["a" * 200 + "\n", "code\n", "\ncode", "a" * 201])
def test_text_fields_are_matched_in_full(code):
    """EDGE-1: a trailing newline (which ``$`` lets through) makes error_code invalid."""
    with pytest.raises(ActionError) as caught:
        parse_receipt(receipt(status="failed", error_code=code), IDENTITY)
    assert caught.value.code == "action_result_invalid"


def test_unknown_fields_are_ignored():
    """EDGE-2: fields the contract does not know are ignored, as the synchronous path does."""
    parsed = parse_receipt(receipt(status="applied", platform_note="done by batch 7"), IDENTITY)
    assert parsed.status == "applied"
