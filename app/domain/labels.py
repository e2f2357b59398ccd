"""Readable words for the product's codes (SPEC REV-3).

Decision codes, action codes, states and approval modes are stored as codes; people
read labels. An installation may set its own label per code (admin screens); where
it has none, `DEFAULT_LABELS` gives one, and a code no one labelled reads as itself
in words (``restrict_account`` → "Restrict account"). Pages show the code beside the
label in small print, so a label can never hide what is stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# kind -> what the admin screen calls it
KINDS: dict[str, str] = {
    "decision": "Decision codes",
    "action": "Action codes",
    "proposal_state": "Action states",
    "report_state": "Report states",
    "appeal_state": "Appeal states",
    "appeal_outcome": "Appeal outcomes",
    "correction_state": "Correction states",
    "completion_state": "Appeal decision completion",
    "task_state": "Approval task states",
    "approval_mode": "Approval modes",
    "authority_mode": "Workflow authority",
    "subject_kind": "Kinds of reported subject",
    "report_reason": "Report reasons",
    "report_category": "Report categories",
    "statement_state": "Statements of reasons",
}

DEFAULT_LABELS: dict[str, dict[str, str]] = {
    "decision": {
        "remove_content": "Remove content",
        "restrict_account": "Restrict account",
        "suspend_account": "Suspend the author for a while",
        "no_violation": "No violation",
    },
    "action": {
        "takedown": "Take the content down",
        "restore": "Restore the content",
        "suspend_account": "Suspend the account",
        "unsuspend_account": "Lift the suspension",
        "notify_user": "Tell the user why (statement of reasons)",
    },
    "proposal_state": {
        "approval_required": "Waiting for approval",
        "approved": "Approved, not sent yet",
        "rejected": "Rejected",
        "queued": "Queued for delivery",
        "applying": "Being sent",
        "applied": "Applied on the platform",
        "failed": "Delivery failed",
        "cancelled": "Cancelled, nothing sent",
        "compensation_required": "Undo proposed",
    },
    "report_state": {"open": "Open", "decided": "Decided", "appealed": "Under appeal", "closed": "Closed"},
    "appeal_state": {"open": "Waiting for a decision", "decided": "Decided"},
    "appeal_outcome": {
        "upheld": "Upheld: the decision stands",
        "modified": "Modified: correct the enforcement",
        "reversed": "Reversed: undo the enforcement",
    },
    "correction_state": {
        "pending": "Waiting for a reviewer",
        "proposed": "Correction proposed",
        "confirmed": "Done",
        "failed": "Failed",
        "rejected": "Rejected",
    },
    "completion_state": {"waiting": "waiting for its correction", "completed": "completed"},
    "task_state": {"open": "Open", "claimed": "Claimed", "completed": "Done", "cancelled": "Cancelled"},
    "approval_mode": {
        "human": "A second person approves",
        "bounded_auto": "Automatic, within budgets",
    },
    "authority_mode": {
        "off": "Off — the workflow does nothing",
        "shadow": "Shadow — it records what it would do",
        "assist": "Assist — the workflow proposes, people decide",
        "bounded_auto": "Bounded automation — it acts within budgets",
    },
    # The queue names a subject by what it is (QUEUE-1, QUEUE-6).
    "subject_kind": {
        "user": "Account", "account": "Account", "post": "Post", "record": "Record", "comment": "Comment",
        "content": "Content", "author_of": "The author's account",
    },
    "report_reason": {"spam": "Spam", "harassment": "Harassment", "hate": "Hateful conduct", "other": "Other"},
    "report_category": {"abuse": "Abuse", "illegal_content": "Illegal content"},
    # A statement of reasons' submission to the Transparency Database (DSA-3).
    "statement_state": {
        "pending": "Waiting to be sent to the Transparency Database",
        "submitted": "In the Transparency Database",
        "dead_letter": "Refused by the Transparency Database",
    },
}

MAX_LABEL = 100
CODE_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def humanise(code: str) -> str:
    """A code read as words: ``restrict_account`` → "Restrict account"."""
    words = code.replace("_", " ").strip()
    return words[:1].upper() + words[1:] if words else code


def label_for(configured: Mapping[tuple[str, str], str], kind: str, code: str | None) -> str:
    """The label people read for a code (REV-3).

    Args:
        configured: the installation's own labels, by (kind, code).
        kind: one of `KINDS`.
        code: the stored code (None or empty reads as an em dash).

    Returns:
        The configured label, else the default, else the code in words.
    """
    if not code:
        return "—"
    return configured.get((kind, code)) or DEFAULT_LABELS.get(kind, {}).get(code) or humanise(code)


def label_choices(configured: Mapping[tuple[str, str], str], kind: str) -> list[tuple[str, str]]:
    """The known codes of `kind` with their labels, for a <select> (QUEUE-1).

    Args:
        configured: the installation's own labels, by (kind, code).
        kind: one of `KINDS`.

    Returns:
        (code, label) pairs: the default codes and those the installation labelled,
        sorted by label.
    """
    codes = set(DEFAULT_LABELS.get(kind, {})) | {code for (k, code) in configured if k == kind}
    return sorted(((code, label_for(configured, kind, code)) for code in codes), key=lambda pair: pair[1].lower())


def code_for(configured: Mapping[tuple[str, str], str], kind: str, text: str) -> str:
    """The code a person meant by `text`: a known code as is, else the code whose label
    it is (case-insensitive), else `text` unchanged (QUEUE-1: "Hateful conduct" → ``hate``)."""
    wanted = text.strip().casefold()
    choices = label_choices(configured, kind)
    for code, _label in choices:
        if code == text:
            return code
    for code, label in choices:
        if label.casefold() == wanted or code.casefold() == wanted:
            return code
    return text


def label_problem(kind: str, code: str, label: str) -> tuple[str, str] | None:
    """Why a label cannot be saved, as (field, message), or None.

    A label is 1..100 characters without control characters; the code is 1..200
    characters of letters, digits and ``_.:-``; the kind is one of `KINDS`.
    """
    if kind not in KINDS:
        return "kind", "Choose what kind of code this labels."
    if not isinstance(code, str) or not CODE_PATTERN.fullmatch(code):
        return "code", "A code is 1 to 200 letters, digits or _ . : - characters."
    if not isinstance(label, str) or not 1 <= len(label.strip()) <= MAX_LABEL:
        return "label", f"A label is 1 to {MAX_LABEL} characters."
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in label):
        return "label", "A label cannot hold control characters."
    return None
