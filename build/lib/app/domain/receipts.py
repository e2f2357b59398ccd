"""The platform's receipt for an action (SPEC RCPT-1, RCPT-2).

A receipt is what the platform answers, synchronously in the delivery response or
later through the async result API. `parse_receipt` checks it names exactly the
proposal it answers and normalises its optional fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ActionError

# Matched with fullmatch: "$" alone would let a trailing newline through (EDGE-1).
ERROR_CODE_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
DEFAULT_RETRY_AFTER_SECONDS = 30
DEFAULT_PROVIDER_ERROR = "action_provider_failed"
RECEIPT_STATUSES = ("accepted", "applied", "failed")
OPTIONAL_FIELDS = ("terminal", "retry_after_seconds", "error_code", "provider_request_id")


class ReceiptFieldInvalid(ActionError):
    """``action_result_invalid`` for one optional field, named in `field` (API-1)."""

    def __init__(self, field_name: str) -> None:
        super().__init__("action_result_invalid")
        self.field = field_name


@dataclass(frozen=True)
class Receipt:
    action_id: str
    operation_id: str
    payload_digest: str
    status: str
    terminal: bool
    error_code: str | None
    retry_after_seconds: int
    provider_request_id: str | None
    sent: tuple[str, ...] = field(default=(), compare=False)  # optional fields the platform sent

    def as_dict(self) -> dict[str, Any]:
        """Every field, defaults filled in (what the delivery logic and audit use)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sent"}

    def as_sent(self) -> dict[str, Any]:
        """The receipt as the platform sent it: its identity and status, and only
        the optional fields it gave, each as parsed (REV-6: no defaults shown)."""
        shown = {"action_id", "operation_id", "payload_digest", "status", *self.sent}
        return {key: value for key, value in self.as_dict().items() if key in shown}


@dataclass(frozen=True)
class ProposalIdentity:
    """What a receipt must repeat exactly: the proposal's id, operation and digest."""

    action_id: str
    operation_id: str
    payload_digest: str


def _as_int(value: Any) -> int | None:
    """An integer-valued JSON number as an int (``30.0`` is 30, EDGE-1), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_receipt(value: Any, identity: ProposalIdentity) -> Receipt:
    """Validate a receipt against the proposal it answers (RCPT-1, EDGE-1, EDGE-2).

    Fields the contract does not know are ignored; integer fields accept
    integer-valued numbers; text fields are matched in full.

    Args:
        value: the decoded JSON body, expected to be an object.
        identity: the proposal's action_id, operation_id and payload_digest.

    Returns:
        A normalised `Receipt`: ``terminal`` is true for ``applied`` and for
        ``failed`` unless the platform said ``terminal: false``; ``error_code`` is
        set only for ``failed`` (default ``action_provider_failed``).

    Raises:
        ActionError: ``action_result_identity_mismatch`` when action_id,
            operation_id or payload_digest differ; ``action_confirmation_required``
            when status is not accepted|applied|failed; ``action_result_invalid``
            for a non-object, or `ReceiptFieldInvalid` (same code, naming the
            field) for a malformed optional field.
    """
    if not isinstance(value, dict):
        raise ActionError("action_result_invalid")
    if (
        value.get("action_id") != identity.action_id
        or value.get("operation_id") != identity.operation_id
        or value.get("payload_digest") != identity.payload_digest
    ):
        raise ActionError("action_result_identity_mismatch")
    status = value.get("status")
    if status not in RECEIPT_STATUSES:
        raise ActionError("action_confirmation_required")
    terminal = value.get("terminal")
    if terminal is not None and not isinstance(terminal, bool):
        raise ReceiptFieldInvalid("terminal")
    retry_after = _as_int(value.get("retry_after_seconds", DEFAULT_RETRY_AFTER_SECONDS))
    if retry_after is None or not 1 <= retry_after <= 21_600:
        raise ReceiptFieldInvalid("retry_after_seconds")
    error_code = value.get("error_code")
    if error_code is not None and (not isinstance(error_code, str) or not ERROR_CODE_PATTERN.fullmatch(error_code)):
        raise ReceiptFieldInvalid("error_code")
    provider_request_id = value.get("provider_request_id")
    if provider_request_id is not None and (not isinstance(provider_request_id, str) or len(provider_request_id) > 500):
        raise ReceiptFieldInvalid("provider_request_id")
    return Receipt(
        action_id=identity.action_id,
        operation_id=identity.operation_id,
        payload_digest=identity.payload_digest,
        status=status,
        terminal=status == "applied" or (status == "failed" and terminal is not False),
        error_code=(error_code or DEFAULT_PROVIDER_ERROR) if status == "failed" else None,
        retry_after_seconds=retry_after,
        provider_request_id=provider_request_id,
        sent=tuple(name for name in OPTIONAL_FIELDS if value.get(name) is not None),
    )
