"""The REST kind: an API that answers in its own shape (SPEC PLAT-3).

The component's reference says how to call it and how to read it (see
`app.domain.platform_kinds.rest_reference_problems`). Idempotency: every request
carries ``Idempotency-Key: <operation id>`` (the same for every attempt and cycle),
and a later attempt with a read-back declared reads back first and sends the update
again only when the platform does not already show the intended state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from app import egress
from app.domain.digests import canonical_json
from app.domain.platform_kinds import (
    RestOperation,
    fill_path,
    parse_rest_reference,
    rest_body,
    rest_outcome,
    rest_read_back_agrees,
)

from .kinds import Request


@dataclass(frozen=True)
class RestCall:
    """One attempt's plan against a REST API, as plain values."""

    installation_id: str
    base_url: str
    operation: RestOperation
    update_url: str
    body: bytes
    read_back_url: str | None
    bearer_token: str | None
    recheck_first: bool
    confirmed: bool = False

    @classmethod
    def plan(cls, *, installation_id, base_url, reference, fields, secret, attempt_number, standard_body) -> RestCall:
        """Plan an attempt (PLAT-3).

        Raises:
            ActionError: ``action_component_operation_invalid`` (reference),
                ``platform_subject_invalid`` (a path placeholder without a value),
                ``action_configuration_invalid`` (the body mapping does not evaluate).
        """
        operation = parse_rest_reference(reference)
        update_url = egress.build_url(base_url, fill_path(operation.path, fields))
        read_back_url = None
        if operation.read_back is not None:
            read_back_url = egress.build_url(base_url, fill_path(operation.read_back.path, fields))
        body = canonical_json(rest_body(operation, fields, standard_body)).encode("utf-8")
        return cls(
            installation_id=installation_id,
            base_url=base_url,
            operation=operation,
            update_url=update_url,
            body=body,
            read_back_url=read_back_url,
            bearer_token=secret,
            recheck_first=attempt_number > 1 and read_back_url is not None,
        )

    def headers(self) -> dict[str, str]:
        return {}

    def signing_secret(self, connection_secret: str | None) -> str | None:
        return connection_secret  # signed like every console request, when the connection has a secret

    def first(self) -> Request:
        return self._read_back("recheck") if self.recheck_first else self.update()

    def update(self) -> Request:
        return Request("update", self.operation.method, self.update_url, self.body)

    def read_back(self) -> Request | None:
        return self._read_back("read-back") if self.read_back_url else None

    def _read_back(self, purpose: str) -> Request:
        return Request(purpose, self.operation.read_back.method, self.read_back_url)

    def after_recheck(self, answer) -> RestCall:
        return replace(self, confirmed=self.agrees(answer, "recheck"))

    def outcome(self, answer) -> str:
        """The outcome the declared status key and JMESPath give; a status without a
        key keeps its HTTP class's meaning (raised)."""
        outcome = rest_outcome(self.operation, answer.status, answer.body)
        if outcome is None:
            raise answer.default_error()
        return outcome

    def agrees(self, answer, _purpose: str) -> bool:
        """A read-back agrees when it answered 2xx with the expected value; anything
        else (404 before the change exists, 5xx) is disagreement, never terminal."""
        return answer.error is None and rest_read_back_agrees(self.operation.read_back, answer.body)

    def fields(self) -> dict[str, Any]:
        return {}
