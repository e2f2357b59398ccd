"""Appeal corrections (SPEC CORR). Eligibility is completed by the appeals work;
until then a correction proposal is never eligible."""

from __future__ import annotations

from app.domain.errors import ActionError


def check_correction_eligible(session, proposal, lock: bool = False) -> None:
    """Raise unless an appeal correction may still be delivered (CORR-1, CORR-3).

    Raises:
        ActionError: ``appeal_correction_precondition_changed``.
    """
    raise ActionError("appeal_correction_precondition_changed")


def reconcile_appeal_completion(uow, report_id: str) -> None:
    """Complete appeal decisions whose correction was confirmed (CORR-4)."""
