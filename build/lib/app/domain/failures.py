"""Delivery failures in words (SPEC QUEUE-6): a sentence for each error code a
platform or a delivery can produce, and a short, safe excerpt of the platform's
answer kept on the attempt row. Codes stay in small print beside the words."""

from __future__ import annotations

EXCERPT_CHARS = 300  # the longest excerpt of an answer's body kept on an attempt row

FAILURE_WORDS: dict[str, str] = {
    # what the platform answered (HTTP status classes, egress.send)
    "platform_client_error": "The platform refused the request as wrong (a 4xx answer); sending it again would not help.",
    "platform_server_error": "The platform had an error of its own (a 5xx answer); the console tries again.",
    "platform_request_timeout": "The platform said it ran out of time (408); the console tries again.",
    "platform_rate_limited": "The platform asked the console to slow down (429); the console tries again later.",
    "platform_redirect_refused": "The platform answered with a redirect, which the console does not follow.",
    "platform_response_too_large": "The platform's answer was too large to read.",
    "platform_endpoint_gone": "The platform says this endpoint no longer exists.",
    "platform_event_send_failed": "The console could not tell the platform about the event.",
    # the connection itself (nothing or little reached the platform)
    "connection_failed": "The console could not reach the platform (the connection failed or was cut).",
    "connection_timeout": "The platform did not answer in time; the console tries again.",
    "tls_certificate_invalid": "The platform's certificate does not verify, so nothing was sent.",
    "tls_handshake_failed": "The secure (TLS) connection to the platform failed, so nothing was sent.",
    "egress_host_not_allowed": "The platform's address is not among the connection's allowed hosts; nothing was sent.",
    "egress_destination_forbidden": "The platform's address is a private or forbidden one; nothing was sent.",
    "egress_url_invalid": "The connection's URL is not valid; nothing was sent.",
    # waiting, not failing
    "connection_circuit_open": "Not sent yet: waiting for the platform (it kept failing; a probe will test it).",
    "connection_probe_in_flight": "Not sent yet: waiting for the platform (a probe is testing it).",
    "connection_paused": "Not sent yet: waiting for the platform (it asked for a pause).",
    "connection_rate_limited": "Not sent yet: waiting for the platform (the connection's rate limit).",
    "connection_disabled": "Not sent yet: waiting for the platform (its endpoint is disabled until an admin re-enables it).",
    "delivery_batch_released": "Not sent yet: waiting for the platform (held back with its batch after another item failed).",
    "budget_exhausted": "Not sent yet: waiting for room in a budget.",
    # the delivery's own outcomes
    "action_delivery_attempts_exhausted": "Every attempt of the delivery cycle failed; an operator may retry.",
    "action_delivery_failed": "The platform reported that the action failed.",
    "action_provider_failed": "The platform reported that the action failed.",
    "action_confirmation_timed_out": "The platform accepted the action but never confirmed it in time.",
    "action_response_invalid": "The platform's answer could not be understood.",
    "action_response_schema_invalid": "The platform's answer did not have the expected shape.",
    "action_result_identity_mismatch": "The platform's result named another action.",
    "action_lease_too_short": "The worker's time ran out before it could send; the console tries again.",
    "action_precondition_changed": "The case changed after approval, so the action was not sent.",
    "action_approval_expired": "The approval expired before the action could be sent.",
    "action_cancelled": "The action was cancelled; nothing more is sent.",
    "action_reversal_failed": "The reversal of this temporary action failed.",
    "action_reversal_superseded": "Another reversal replaced this one.",
    "action_reversal_undone_by_correction": "An appeal correction undid the action, so its reversal was cancelled.",
}


def failure_words(code: str | None) -> str | None:
    """The sentence for a failure code (QUEUE-6).

    Args:
        code: an attempt's or a proposal's error code, e.g. ``platform_client_error``.

    Returns:
        One sentence, or None for no code. A code without a sentence reads as itself
        in words ("Something_new happened" → "Something new happened"), so a new code
        never shows bare.
    """
    if not code:
        return None
    if code in FAILURE_WORDS:
        return FAILURE_WORDS[code]
    return code.replace("_", " ").capitalize() + "."


def body_excerpt(body: bytes | None, limit: int = EXCERPT_CHARS) -> str | None:
    """A short excerpt of a platform's answer for the attempt row (QUEUE-6).

    Args:
        body: the answer's bytes (any encoding; may be cut), or None.
        limit: the most characters kept (default 300); longer text ends with "…".

    Returns:
        The text decoded as UTF-8 (undecodable bytes replaced), control characters
        and runs of white space folded to one space, at most `limit` characters; None
        for no or an empty body. It is stored as text and escaped where shown.
    """
    if not body:
        return None
    text = body[: limit * 4].decode("utf-8", errors="replace")
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


CONNECTION_EVENTS: dict[str, str] = {
    "connection.opened": "its breaker opened after repeated failures; deliveries wait for a probe",
    "connection.probe_started": "a probe is testing it",
    "connection.closed": "it answers again; deliveries resume",
    "connection.reopened": "the probe failed; deliveries keep waiting",
    "connection.paused": "it asked for a pause; deliveries wait",
    "connection.disabled": "its endpoint was disabled; deliveries wait for an admin",
    "connection.re_enabled": "an admin re-enabled its endpoint",
}


def connection_event_words(action: str) -> str:
    """A connection's health transition in words (QUEUE-6, CONN-1), e.g.
    ``connection.opened`` → "its breaker opened after repeated failures; …"."""
    return CONNECTION_EVENTS.get(action, action.rpartition(".")[2].replace("_", " "))
