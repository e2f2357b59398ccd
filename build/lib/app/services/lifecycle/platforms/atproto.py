"""The AT Protocol PDS kind: takedown and reversal through the PDS admin API (SPEC PLAT-1, PLAT-2).

Authenticated as the PDS administrator: Basic ``admin:<password>``, the password
being the connection's secret (its bearer token field, stored and never shown again
like every connection secret). The takedown reference is the operation id, so the
update is idempotent by reference: sending it again sets the same state with the
same reference, and a later attempt reads the status first and sends nothing when
it already shows ours.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Any

from app import egress
from app.domain.digests import canonical_json
from app.domain.errors import ActionError
from app.domain.platform_kinds import (
    AUTH_FAILED,
    STATUS_PATH,
    UPDATE_PATH,
    PdsOperation,
    needs_lookup,
    parse_pds_reference,
    pds_error,
    pds_read_back_agrees,
    pds_status_query,
    pds_subject,
    pds_subject_from_status,
    pds_update_body,
)

from .kinds import Request


@dataclass(frozen=True)
class PdsCall:
    """One attempt's plan against a PDS, as plain values."""

    installation_id: str
    base_url: str
    operation: PdsOperation
    subject: dict[str, str]
    operation_id: str
    password: str
    recheck_first: bool
    confirmed: bool = False
    bearer_token = None  # Basic auth instead (see `headers`)

    @classmethod
    def plan(cls, *, installation_id, base_url, reference, fields, secret, attempt_number) -> PdsCall:
        """Plan an attempt (PLAT-1).

        Raises:
            ActionError: ``action_component_operation_invalid``, ``platform_subject_invalid``,
                ``platform_auth_failed`` (no admin password on the connection).
        """
        operation = parse_pds_reference(reference)
        subject = pds_subject(operation, fields["target"])
        if not secret:
            raise ActionError(AUTH_FAILED)
        return cls(
            installation_id=installation_id,
            base_url=base_url,
            operation=operation,
            subject=subject,
            operation_id=fields["operation_id"],
            password=secret,
            recheck_first=attempt_number > 1 or needs_lookup(subject),
        )

    def headers(self) -> dict[str, str]:
        token = base64.b64encode(f"admin:{self.password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {token}"}

    def signing_secret(self, _connection_secret: str | None) -> None:
        return None  # the admin API authenticates by password; it knows no webhook signatures

    def first(self) -> Request:
        return self.status_request("recheck") if self.recheck_first else self.update()

    def update(self) -> Request:
        body = pds_update_body(self.subject, self.operation, self.operation_id)
        url = egress.build_url(self.base_url, UPDATE_PATH)
        return Request("update", "POST", url, canonical_json(body).encode("utf-8"))

    def status_request(self, purpose: str) -> Request:
        url = egress.build_url(self.base_url, STATUS_PATH) + "?" + pds_status_query(self.subject)
        return Request(purpose, "GET", url)

    def read_back(self) -> Request:
        return self.status_request("read-back")

    def after_recheck(self, answer) -> PdsCall:
        """Learn from the status read first: the record's CID, and whether it already
        shows our state (then the update is not sent again)."""
        value = self._read(answer)
        subject = pds_subject_from_status(self.subject, value)
        return replace(self, subject=subject, confirmed=pds_read_back_agrees(value, self.operation, self.operation_id))

    def outcome(self, answer) -> str:
        """The update was taken (2xx): the read-back decides whether it holds."""
        self._read(answer)
        return "applied"

    def agrees(self, answer, _purpose: str) -> bool:
        return pds_read_back_agrees(self._read(answer), self.operation, self.operation_id)

    def _read(self, answer) -> Any:
        value = _decode(answer.body)
        if answer.error is not None:
            raise pds_error(answer.status, value) or answer.default_error()
        return value


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except (ValueError, RecursionError):  # not JSON, or nested too deep to decode
        return None
