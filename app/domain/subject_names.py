"""Subjects named by what they are (SPEC QUEUE-6): an account action names the account
(its name and reference), not the post the report was about."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.domain.bulk.subjects import PDS_ACCOUNT, subject_kind
from app.domain.text_safety import BIDI_CONTROLS

ACCOUNT_TARGET_KINDS = ("author_of", "account")  # a target acting on an account
ACCOUNT_REFERENCE_KINDS = (PDS_ACCOUNT, "user")  # references that name an account


@dataclass(frozen=True)
class SubjectName:
    """What an action acts on, for people.

    Attributes:
        account: whether it is an account.
        reference: the subject's own reference (``user:5120``), or the target's
            reference when the account is not known.
        name: the account's display name (``goalline_greg``), if known.
        via: the content the account was found through (``post:1003``), if any.
        mark: its protected-subject mark (`app.domain.protected.ProtectionMark`,
            POL-4), if protected.
    """

    account: bool
    reference: str
    name: str | None = None
    via: str | None = None
    mark: Any = None

    def word_parts(self) -> tuple[str, str | None, str]:
        """`words` as (before, the account's name or None, after): the name is the
        platform's text, for a page to isolate (FOUR-10)."""
        if not self.account:
            return self.reference, None, ""
        if self.via and self.reference == self.via:
            return f"the author of {self.via}", None, ""
        return ("the account ", self.name, f" ({self.reference})") if self.name else (f"the account {self.reference}", None, "")

    @property
    def words(self) -> str:
        """"the account goalline_greg (user:5120)", "the author of post:1003", or the
        content's reference."""
        before, name, after = self.word_parts()
        return f"{before}{name or ''}{after}"


def is_account_target(target: dict | None) -> bool:
    """Whether an action's target is an account: its kind says so, or its reference
    names one (a DID, ``user:``)."""
    if not isinstance(target, dict):
        return False
    return target.get("kind") in ACCOUNT_TARGET_KINDS or subject_kind(str(target.get("reference", ""))) in ACCOUNT_REFERENCE_KINDS


def name_subject(target: dict | None, author_reference: str | None = None, author_name: str | None = None) -> SubjectName:
    """Name an action's target (QUEUE-6).

    Args:
        target: the proposal's target (``{"kind": "author_of", "reference": "post:1003"}``).
        author_reference, author_name: what the report's evidence says about the author
            of the target's reference (or about the account it names), when known.

    Returns:
        A `SubjectName`: for an account target, the account itself (its name when
        known); for content, its reference.
    """
    reference = str((target or {}).get("reference", "")) if isinstance(target, dict) else ""
    if not is_account_target(target):
        return SubjectName(False, reference)
    if subject_kind(reference) in ACCOUNT_REFERENCE_KINDS:  # the reference is the account
        return SubjectName(True, reference, author_name if author_reference == reference else None)
    return SubjectName(True, author_reference or reference, author_name, via=reference)


def title_parts(label: str, subject: SubjectName) -> tuple[str, str | None, str]:
    """An action's title as (before, the account's name or None, after): "Suspend the
    account " + "goalline_greg" + " (user:5120)", "Take the content down post:1003"; a
    label already ending in "the account" is not repeated. The name is the platform's
    text: `app.web.formatting.action_heading` isolates it in <bdi> (FOUR-10)."""
    before, name, after = subject.word_parts()
    if subject.account and label.endswith(" the account") and before.startswith("the account "):
        return f"{label} {before[len('the account '):]}", name, after
    return (f"{label} {before}" if not subject.account else f"{label}: {before}"), name, after


def action_title(label: str, subject: SubjectName) -> str:
    """An action's title as plain text (a page's <title>): `title_parts` joined, the
    name without bidirectional controls so it cannot reorder the title (FOUR-10)."""
    before, name, after = title_parts(label, subject)
    return before + "".join(ch for ch in name or "" if ch not in BIDI_CONTROLS) + after
