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
