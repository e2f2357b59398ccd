"""Recording an appeal correction that a reviewer made by hand (SPEC CORR-2, CORR-4).

An automated correction is delivered by the workers once its proposal is approved;
a manual one (no correcting component) is done outside the console, and a reviewer
records it here, which may complete the appeal decision and close the report.
"""

from __future__ import annotations

from app.domain.case_states import CORRECTION, CorrectionMove
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.models import AppealCorrection, OperatorUser, move_row
from app.services.cases.appeals import appeal_text
from app.services.lifecycle.corrections import correction_problems, reconcile_appeal_completion, reviewer_problem
from app.services.uow import Actor, unit_of_work


def record_manual_correction(
    correction_id: str, *, note: str, operator: OperatorUser, appeal_id: str | None = None
) -> None:
    """A reviewer records that a manual correction was done by hand (CORR-2, CORR-4).

    Raises:
        ApiError: 404 ``correction_not_found``; 409 ``correction_not_manual`` /
            ``correction_not_pending``; 403 ``maker_checker_violation``; 409
            ``appeal_correction_precondition_changed``; 400 ``appeal_note_invalid``.
    """
    note = appeal_text(note, "note", 2000, required=True)
    with unit_of_work() as uow:
        session = uow.session
        correction = session.get(AppealCorrection, correction_id)
        if (
            correction is None
            or correction.installation_id != operator.installation_id
            or (appeal_id and correction.appeal_id != appeal_id)
        ):
            raise ApiError(404, "correction_not_found", "No such correction.")
        if correction.mode != "manual":
            raise ApiError(
                409, "correction_not_manual", "This correction is delivered by the workers; approve its proposal."
            )
        if not CORRECTION.can(CorrectionMove.RECORD_MANUAL, correction.state):
            raise _not_pending()
        problem = reviewer_problem(session, correction, operator.id, you=True)
        if problem:
            raise ApiError(403, "maker_checker_violation", problem)
        correction.approved_by, correction.approved_at = operator.id, utcnow()
        if correction_problems(session, correction):
            raise ApiError(
                409, "appeal_correction_precondition_changed", "The case changed; this correction no longer applies."
            )
        recorded = {"note": note, "confirmed_at": utcnow()}
        if not move_row(session, correction, CorrectionMove.RECORD_MANUAL, values=recorded):
            raise _not_pending()  # another reviewer recorded it meanwhile
        uow.audit(
            correction.installation_id,
            f"correction-recorded:{correction.id}",
            "appeal.correction_recorded",
            Actor("operator", operator.id),
            "appeal_correction",
            correction.id,
            {"note": note},
        )
        reconcile_appeal_completion(uow, correction.report_id)
        uow.commit()


def _not_pending() -> ApiError:
    return ApiError(409, "correction_not_pending", "This correction was already recorded.")


def approvable_corrections(operator: OperatorUser, correction_ids: list[str]) -> tuple[int, list[str]]:
    """Of the corrections an appeal decision just prepared, how many this operator may
    approve or record, and why not for the others (CORR-2, FOUR-1; issue 25: the
    reviewer who recorded "Reversed" is not told to approve its correction).

    Args:
        operator: the viewing operator.
        correction_ids: ids of AppealCorrection rows of the operator's installation.

    Returns:
        (count the operator may approve, the distinct reasons, in words, why not for
        the rest); ids of another installation or unknown are left out.
    """
    allowed, reasons = 0, []
    with unit_of_work() as uow:
        for correction_id in correction_ids:
            correction = uow.session.get(AppealCorrection, correction_id)
            if correction is None or correction.installation_id != operator.installation_id:
                continue
            problem = reviewer_problem(uow.session, correction, operator.id, you=True)
            if problem is None:
                allowed += 1
            elif problem not in reasons:
                reasons.append(problem)
    return allowed, reasons
