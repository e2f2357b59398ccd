"""Preconditions about the case, re-checked before every delivery (SPEC PRE)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ActionError

# precondition key -> attribute of the report snapshot it is compared with (PRE-1)
COMPARED_FIELDS = {
    "report_state": "report_state",
    "queue_id": "queue_id",
    "latest_decision_id": "latest_decision_id",
    "decision_code": "latest_decision_code",
    "target_reference": "target_reference",
}

CLOSED_TO_ORDINARY_ACTIONS = ("appealed", "closed")


@dataclass(frozen=True)
class ReportSnapshot:
    """The report as it is now: what preconditions are compared with."""

    report_state: str
    queue_id: str | None
    latest_decision_id: str | None
    latest_decision_code: str | None
    target_reference: str | None  # the report's first target


def closed_to_ordinary_actions(report_state: str) -> bool:
    """Whether a report in `report_state` takes only appeal corrections (PRE-2): it
    is appealed or closed."""
    return report_state in CLOSED_TO_ORDINARY_ACTIONS


def acts_on_closed_case(*, is_correction: bool, is_reversal: bool, is_notice: bool = False) -> bool:
    """Whether a proposal may still act on a case that is appealed or closed (PRE-2,
    CORR-3, TEMP-2, FOUR-7, DSA-4): an appeal correction (its own eligibility is checked by
    the corrections rules), a reversal, which ends a temporary action whatever
    became of the case, and the affected user's notice of an applied restriction,
    which they are owed whatever became of the case. The one predicate delivery and
    an operator's retry both ask.

    Args:
        is_correction: the proposal is an appeal correction.
        is_reversal: the proposal ends a temporary action (scheduled, "end now", "extend").
        is_notice: the proposal is a restriction's notice (DSA-4).
    """
    return is_correction or is_reversal or is_notice


def check_preconditions(preconditions: dict[str, Any], report: ReportSnapshot, is_correction: bool = False) -> None:
    """Raise unless the case still is as the proposal expects.

    Args:
        preconditions: the proposal's preconditions object.
        report: the report now.
        is_correction: the proposal is an appeal correction (its own eligibility is
            checked by the corrections rules, CORR-3).

    Raises:
        ActionError: ``action_case_no_longer_eligible`` when the report is appealed
            or closed and this is not an appeal correction (PRE-2);
            ``action_precondition_changed`` when a named field differs (PRE-1).
    """
    if not is_correction and closed_to_ordinary_actions(report.report_state):
        raise ActionError("action_case_no_longer_eligible")
    for key, attribute in COMPARED_FIELDS.items():
        if key in preconditions and preconditions[key] != getattr(report, attribute):
            raise ActionError("action_precondition_changed")
