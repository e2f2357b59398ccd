"""Who may approve what: the maker/checker rule (SPEC APPR-4, CORR-2, COMP-3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

REVIEWER_ROLE = "reviewer"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str | None = None  # shown beside the disabled buttons

    def __bool__(self) -> bool:
        return self.allowed


def approver_verdict(approver_id: str, approver_roles: Iterable[str], makers: Iterable[str | None]) -> Verdict:
    """Decide whether an operator may approve or reject a proposal.

    Args:
        approver_id: the operator who wants to decide.
        approver_roles: that operator's roles.
        makers: operator ids who took part in making it: the proposal's creator,
            the maker of the decision it enforces, and for corrections the appeal
            decision's maker (None entries are ignored).

    Returns:
        A `Verdict`; when refused, its reason is a sentence for the console.
    """
    if REVIEWER_ROLE not in set(approver_roles):
        return Verdict(False, "Only reviewers can approve or reject actions.")
    if approver_id in {m for m in makers if m}:
        return Verdict(
            False,
            "You made this decision or proposed this action; a second reviewer must check it.",
        )
    return Verdict(True)
