"""Erasure and retention of personal data (SPEC OPS-4), as pure rules.

What is personal: the platform's text about a subject (evidence content, the author's
display name, media links, the permalink), a report's free-text summary, an appeal's
statement, and the queue's copies of them (preview, author name, search text). What
stays: references (pseudonymous ids the platform gave, needed to join and to audit),
digests, codes, times and the audit chain, whose rows never held that text (report
intake audits references and evidence digests only), so every HMAC and checkpoint
still verifies after an erasure.

An erasure (or a retention period, which erases by itself) needs two admins: one
requests it with a reason, a different one approves it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from .errors import ApiError
from .reasons import reason_problem

MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 36_500  # a hundred years: longer is "keep"
MAX_REFERENCE = 500


class ErasureKind(StrEnum):
    SUBJECT = "subject"  # erase one subject's personal data now
    RETENTION = "retention"  # set the installation's retention period


class ErasureState(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ErasedBy(StrEnum):
    """Why a row's personal data is gone (the ``erased_reason`` column)."""

    REQUEST = "request"
    RETENTION = "retention"


ERASED_WORDS = {ErasedBy.REQUEST.value: "by request", ErasedBy.RETENTION.value: "by retention"}


def erased_words(reason: str | None) -> str:
    """"by request" or "by retention", for "Erased on <time>, by request" (OPS-4)."""
    return ERASED_WORDS.get(reason or "", "by request")


def check_reason(reason: object) -> str:
    """The reason an erasure request gives, stripped (OPS-4).

    Raises:
        ApiError: 400 ``erasure_reason_invalid`` (fewer than 12 visible characters in
            two words, more than 2,000 characters, control characters).
    """
    problem = reason_problem(reason)
    if problem:
        if not isinstance(reason, str) or not reason.strip():
            problem = "Give a reason: who asked for the erasure and on what ground (e.g. a ticket number)."
        raise ApiError(400, "erasure_reason_invalid", problem, "reason")
    return str(reason).strip()


def check_subject(reference: object) -> str:
    """The subject reference to erase (``user:5120``), stripped.

    Raises:
        ApiError: 400 ``erasure_subject_invalid`` (empty, over 500 characters, or
            holding whitespace).
    """
    text = reference.strip() if isinstance(reference, str) else ""
    if not text or len(text) > MAX_REFERENCE or any(ch.isspace() for ch in text):
        raise ApiError(400, "erasure_subject_invalid",
                       "Name the subject by its reference, e.g. user:5120 (no spaces, at most 500 characters).",
                       "subject")
    return text


def parse_retention_days(value: object) -> int | None:
    """A retention period in days from a form (OPS-4); empty means keep (None).

    Raises:
        ApiError: 400 ``retention_days_invalid``: not a whole number of days from 1 to 36,500.
    """
    text = str(value).strip() if value is not None else ""
    if not text:
        return None
    if not text.isascii() or not text.isdigit() or not MIN_RETENTION_DAYS <= int(text) <= MAX_RETENTION_DAYS:
        raise ApiError(400, "retention_days_invalid",
                       f"The retention period is a whole number of days from {MIN_RETENTION_DAYS} to "
                       f"{MAX_RETENTION_DAYS:,}, or empty to keep personal data.", "days")
    return int(text)


def check_decision(state: str, requested_by: str, decided_by: str) -> None:
    """Whether `decided_by` may approve or reject a request (OPS-4, FOUR-2).

    Raises:
        ApiError: 409 ``erasure_not_pending`` (decided already); 403
            ``erasure_same_admin`` (the requester cannot decide their own request).
    """
    if state != ErasureState.PENDING.value:
        raise ApiError(409, "erasure_not_pending", f"This request was {state} already; nothing changed.")
    if requested_by == decided_by:
        raise ApiError(403, "erasure_same_admin",
                       "Another admin must decide this request: the one who asked cannot approve or reject it.")


def retention_cutoff(now: datetime, days: int) -> datetime:
    """Cases closed (last changed) before this moment are past a `days` retention period."""
    return now - timedelta(days=days)
