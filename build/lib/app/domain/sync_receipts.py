"""A platform's synchronous receipt read leniently where that cannot change its
outcome (SPEC RCPT-1, RCPT-2, DLV-5; issue 22).

The receipt in a delivery's response reports what the platform already did. When a
field that does not decide the outcome is malformed (a ``provider_request_id`` of 501
characters), refusing the whole receipt would record a failure for an action the
platform applied: the record would say the opposite of what happened. So such a
field is cut or dropped, with a note for the attempt row, and the receipt stands.

Which fields decide the outcome: the identity (action_id, operation_id,
payload_digest) and ``status`` always; for a ``failed`` receipt also ``terminal``
(failed for good or not) and ``retry_after_seconds`` (when to try again). Those stay
strict (RCPT-1): a receipt whose outcome is unreadable is still refused. The async
result API is not lenient: its caller can correct and send again.
"""

from __future__ import annotations

from typing import Any

from .errors import ActionError
from .receipts import ERROR_CODE_PATTERN, ProposalIdentity, Receipt, _as_int, parse_receipt

MAX_PROVIDER_REQUEST_ID = 500


def _field_problem(name: str, value: Any) -> str | None:
    """Why an optional field of a receipt is malformed (RCPT-1), or None."""
    if value is None:
        return None
    if name == "terminal":
        return None if isinstance(value, bool) else "not a boolean"
    if name == "retry_after_seconds":
        number = _as_int(value)
        return None if number is not None and 1 <= number <= 21_600 else "out of range"
    if name == "error_code":
        return None if isinstance(value, str) and ERROR_CODE_PATTERN.fullmatch(value) else "malformed"
    if name == "provider_request_id":
        if not isinstance(value, str):
            return "not text"
        return None if len(value) <= MAX_PROVIDER_REQUEST_ID else f"over {MAX_PROVIDER_REQUEST_ID} characters"
    return None


def _non_deciding(status: Any) -> tuple[str, ...]:
    """The optional fields that do not decide the outcome of a receipt of `status`."""
    if status == "failed":
        return ("provider_request_id", "error_code")
    return ("provider_request_id", "error_code", "terminal", "retry_after_seconds")


def lenient_receipt(value: Any, identity: ProposalIdentity) -> tuple[Receipt, list[str]]:
    """Parse a synchronous receipt (RCPT-1), cutting or dropping a malformed field
    that does not decide its outcome instead of refusing it.

    An over-long ``provider_request_id`` is cut to 500 characters; any other such
    field that is malformed is dropped (its default applies).

    Args:
        value: the decoded JSON body of the platform's answer.
        identity: the proposal's action_id, operation_id and payload_digest.

    Returns:
        (the receipt, one note per field cut or dropped, e.g.
        ``"provider_request_id over 500 characters, truncated"``); no notes when the
        receipt was valid as sent.

    Raises:
        ActionError: as `parse_receipt` when the identity, the status or a field
            deciding the outcome is unreadable (``action_result_identity_mismatch``,
            ``action_confirmation_required``, ``action_result_invalid``).
    """
    try:
        return parse_receipt(value, identity), []
    except ActionError as error:
        if error.code != "action_result_invalid" or not isinstance(value, dict):
            raise
        cleaned, notes = dict(value), []
        for name in _non_deciding(value.get("status")):
            problem = _field_problem(name, value.get(name))
            if problem is None:
                continue
            if name == "provider_request_id" and isinstance(value[name], str):
                cleaned[name] = value[name][:MAX_PROVIDER_REQUEST_ID]
                notes.append(f"{name} {problem}, truncated")
            else:
                del cleaned[name]
                notes.append(f"{name} {problem}, dropped")
        if not notes:
            raise
        return parse_receipt(cleaned, identity), notes
