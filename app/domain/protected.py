"""Protected subjects (SPEC POL-4): what an admin may propose to mark, and the mark as
pages show it. Pure: no Flask, no database.

A protected subject is an account (``account``: actions on the account itself, and
on it as the author of a post an action targets through ``author_of``) or an author
(``author``: every target by that author too, posts included). Actions on one route
to the protected policy (`app.services.approval_routing.protection_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.domain.bulk.subjects import canonical_reference, reference_error
from app.domain.errors import ApiError

KINDS = {"account": "An account", "author": "An author: every target by them"}
MIN_REASON, MAX_REASON = 3, 2000


@dataclass(frozen=True)
class ProtectionMark:
    """A subject marked protected, as pages show it (POL-4).

    Attributes:
        id: the `ProtectedSubject` row's id.
        kind: ``account`` or ``author``.
        reference: the canonical reference (``user:5120``).
        reason: why it is protected (the badge's tooltip).
        marked_at: when the marking change applied (UTC).
        change_id: the configuration change that marked it.
    """

    id: str
    kind: str
    reference: str
    reason: str
    marked_at: datetime | None = None
    change_id: str | None = None

    @property
    def title(self) -> str:
        """The badge's tooltip: "Protected account: <reason>"."""
        return f"Protected {self.kind}: {self.reason}"


def check_mark(kind: object, reference: object, reason: object) -> tuple[str, str, str]:
    """A proposal to mark a subject protected, cleaned (POL-4).

    Args:
        kind: ``account`` or ``author``.
        reference: the subject as the platform names it (``user:5120``); any spelling
            `canonical_reference` folds to one form.
        reason: 3..2,000 characters (trimmed), no NUL.

    Returns:
        (kind, canonical reference, reason).

    Raises:
        ApiError: 400 ``protected_kind_invalid``, ``protected_reference_invalid`` or
            ``protected_reference_suspicious`` (FOUR-10), ``protected_reason_invalid``.
    """
    if kind not in KINDS:
        raise ApiError(400, "protected_kind_invalid", "Choose what to protect: an account or an author.", "kind")
    text = reference.strip() if isinstance(reference, str) else ""
    problem = reference_error(text)
    if problem:
        code, message = problem
        suffix = "suspicious" if code.endswith("suspicious") else "invalid"
        raise ApiError(400, f"protected_reference_{suffix}", message, "reference")
    return str(kind), canonical_reference(text), check_reason(reason)


def check_reason(reason: object) -> str:
    """A reason for marking or unmarking (POL-4), trimmed.

    Raises:
        ApiError: 400 ``protected_reason_invalid`` unless 3..2,000 characters without NUL.
    """
    text = reason.strip() if isinstance(reason, str) else ""
    if not MIN_REASON <= len(text) <= MAX_REASON or "\x00" in text:
        raise ApiError(400, "protected_reason_invalid",
                       f"Give a reason of {MIN_REASON} to {MAX_REASON:,} characters.", "reason")
    return text
