"""Error types that carry the SPEC's error codes.

`ActionError` is a domain failure of an action (prepare, delivery, receipt); it knows
whether a delivery may retry and after how long. `ApiError` is what a user or a
platform caused; views turn it into an HTTP answer with the same code.
"""

from __future__ import annotations


class ActionError(Exception):
    """A domain failure named by a SPEC error code.

    Args:
        code: the error code, e.g. ``action_precondition_changed``.
        retryable: whether a delivery attempt that failed this way may run again.
        delay_seconds: the base delay before that retry (DLV-6 multiplies it).
    """

    def __init__(self, code: str, retryable: bool = False, delay_seconds: float = 15) -> None:
        super().__init__(code)
        self.code = code
        self.retryable = retryable
        self.delay_seconds = delay_seconds


class ApiError(Exception):
    """A request refused with an HTTP status, an error code and a message for people.

    Args:
        status: HTTP status (400, 403, 404, 409, 422, ...).
        code: the error code, e.g. ``idempotency_key_reused``.
        message: a sentence that tells the user what happened and what to do.
        field: the form or JSON field at fault, when there is one.
    """

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def as_dict(self) -> dict:
        body = {"error": {"code": self.code, "message": self.message}}
        if self.field:
            body["error"]["field"] = self.field
        return body
