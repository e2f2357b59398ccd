"""A synchronous receipt read leniently where that cannot change its outcome
(RCPT-1, RCPT-2, DLV-5): a malformed field that does not decide the outcome is cut or
dropped with a note; the identity, the status and a failure's terminal and
retry_after_seconds stay strict."""

import pytest

from app.domain.errors import ActionError
from app.domain.receipts import ProposalIdentity, parse_receipt
from app.domain.sync_receipts import lenient_receipt

IDENTITY = ProposalIdentity("act_1", "op_1", "sha256:" + "a" * 64)


def body(status, **fields):
    return {"action_id": "act_1", "operation_id": "op_1", "payload_digest": IDENTITY.payload_digest,
            "status": status, **fields}


@pytest.mark.parametrize("status", ["accepted", "applied", "failed"])
def test_rcpt1_a_valid_receipt_is_read_as_sent_without_notes(status):
    """RCPT-1: a receipt that is valid as sent is exactly `parse_receipt`'s, no notes."""
    value = body(status, provider_request_id="p" * 500, error_code="E.1", retry_after_seconds=21_600, terminal=False)
    receipt, notes = lenient_receipt(value, IDENTITY)
    assert notes == [] and receipt == parse_receipt(value, IDENTITY)


@pytest.mark.parametrize(
    "status, field, value, note",
    [
        ("applied", "provider_request_id", 123, "provider_request_id not text, dropped"),
        ("failed", "provider_request_id", ["x"], "provider_request_id not text, dropped"),
        ("applied", "error_code", "bad code!", "error_code malformed, dropped"),
        ("failed", "error_code", 7, "error_code malformed, dropped"),
        ("failed", "error_code", "", "error_code malformed, dropped"),
        ("accepted", "terminal", "yes", "terminal not a boolean, dropped"),
        ("applied", "terminal", 1, "terminal not a boolean, dropped"),
        ("accepted", "retry_after_seconds", 0, "retry_after_seconds out of range, dropped"),
        ("applied", "retry_after_seconds", 21_601, "retry_after_seconds out of range, dropped"),
        ("accepted", "retry_after_seconds", "30", "retry_after_seconds out of range, dropped"),
        ("accepted", "retry_after_seconds", 1.5, "retry_after_seconds out of range, dropped"),
    ],
)
def test_rcpt1_a_field_not_deciding_the_outcome_is_dropped_and_its_default_applies(status, field, value, note):
    """RCPT-1, RCPT-2: the malformed field is dropped with a note naming it and why;
    the receipt keeps its status and takes that field's default."""
    receipt, notes = lenient_receipt(body(status, **{field: value}), IDENTITY)
    assert notes == [note]
    assert receipt == parse_receipt(body(status), IDENTITY)
    assert field not in receipt.sent


@pytest.mark.parametrize("status", ["accepted", "applied", "failed"])
def test_rcpt1_an_over_long_provider_request_id_is_cut_to_500_characters(status):
    """RCPT-1: 501 characters are cut to the first 500, with a note; not dropped."""
    value = "a" * 500 + "b"
    receipt, notes = lenient_receipt(body(status, provider_request_id=value), IDENTITY)
    assert receipt.provider_request_id == "a" * 500
    assert notes == ["provider_request_id over 500 characters, truncated"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("provider_request_id", "p" * 500),
        ("terminal", True),
        ("terminal", False),
        ("retry_after_seconds", 1),
        ("retry_after_seconds", 21_600),
        ("retry_after_seconds", 30.0),
    ],
)
def test_rcpt1_a_valid_field_next_to_a_malformed_one_is_kept(field, value):
    """RCPT-1, EDGE-1: only the malformed field is dropped; a valid one beside it (at
    the edge of its range, an integer-valued float) is kept as sent."""
    receipt, notes = lenient_receipt(body("accepted", error_code="no spaces allowed", **{field: value}), IDENTITY)
    assert notes == ["error_code malformed, dropped"]
    assert receipt == parse_receipt(body("accepted", **{field: value}), IDENTITY)
    assert field in receipt.sent


def test_rcpt1_every_malformed_field_gets_its_own_note():
    """RCPT-1: several malformed fields are each cut or dropped, one note each."""
    value = body("applied", provider_request_id="x" * 600, error_code="a b", terminal="no", retry_after_seconds=-1)
    receipt, notes = lenient_receipt(value, IDENTITY)
    assert sorted(notes) == sorted([
        "provider_request_id over 500 characters, truncated",
        "error_code malformed, dropped",
        "terminal not a boolean, dropped",
        "retry_after_seconds out of range, dropped",
    ])
    assert (receipt.status, receipt.terminal, receipt.retry_after_seconds) == ("applied", True, 30)
    assert receipt.provider_request_id == "x" * 500


def test_rcpt2_a_failure_whose_error_code_is_dropped_takes_the_default_code():
    """RCPT-2: a failed receipt without a readable error_code records action_provider_failed
    and keeps its terminal and retry decision."""
    receipt, notes = lenient_receipt(body("failed", error_code="?!", terminal=False, retry_after_seconds=60), IDENTITY)
    assert notes == ["error_code malformed, dropped"]
    assert (receipt.error_code, receipt.terminal, receipt.retry_after_seconds) == ("action_provider_failed", False, 60)


@pytest.mark.parametrize(
    "value, code",
    [
        (body("failed", terminal="no"), "action_result_invalid"),
        (body("failed", terminal=0, error_code="a b"), "action_result_invalid"),
        (body("failed", retry_after_seconds=0), "action_result_invalid"),
        (body("failed", retry_after_seconds=21_601, provider_request_id=5), "action_result_invalid"),
        (body("done", error_code="a b"), "action_confirmation_required"),
        ({**body("applied", error_code="a b"), "action_id": "act_2"}, "action_result_identity_mismatch"),
        (["not", "an", "object"], "action_result_invalid"),
        ("applied", "action_result_invalid"),
    ],
)
def test_rcpt1_a_receipt_whose_outcome_is_unreadable_is_still_refused(value, code):
    """RCPT-1: the identity, the status and a failure's terminal and retry_after_seconds
    decide the outcome; unreadable, the receipt is refused whatever else it holds."""
    with pytest.raises(ActionError) as caught:
        lenient_receipt(value, IDENTITY)
    assert caught.value.code == code


def test_rcpt2_a_valid_error_code_next_to_a_malformed_field_is_kept():
    """RCPT-2: a failure keeps the error_code the platform gave when only another field
    (here provider_request_id) is dropped."""
    receipt, notes = lenient_receipt(body("failed", error_code="rate.limited", provider_request_id=5), IDENTITY)
    assert notes == ["provider_request_id not text, dropped"]
    assert receipt.error_code == "rate.limited"
