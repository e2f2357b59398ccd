"""An appeal as the platform sees it (SPEC §7 DSA-5): its state, the outcome once
decided, and the outcome notice to give the complainant.

Before issue 28 the platform learnt an appeal's outcome only indirectly, from the
correction actions a ``modified`` or ``reversed`` outcome sends it (an ``upheld``
one sent nothing). The appeal's own representation now carries it: the answer to
``POST /api/v1/appeals`` (a repeat with the same ``external_id`` gives the appeal as
it is now) and ``GET /api/v1/appeals/{appeal_id}``, both with ``outcome_notice:
{language, text}`` once decided (`app.services.dsa.complaints.outcome_notice`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import joinedload, selectinload

from app.domain.clock import iso
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Appeal, AppealDecision
from app.services.dsa.complaints import outcome_notice

MAX_APPEAL_ID = 200


def latest_appeal_decision(appeal: Appeal) -> AppealDecision | None:
    """The appeal's newest decision (by time, then id), or None while it is open."""
    return max(appeal.decisions, key=lambda ad: (ad.created_at, ad.id), default=None)


def appeal_status(appeal_id: str, *, integration_id: str, created: bool | None = None) -> dict[str, Any]:
    """The appeal `appeal_id` for the platform that filed it (DSA-5).

    Args:
        appeal_id: the appeal's id (as ``POST /api/v1/appeals`` answered).
        integration_id: the calling platform; another platform's appeal is not found.
        created: for the filing's answer, whether this call filed it.

    Returns:
        ``{"appeal_id", "external_id", "report_reference", "state", "outcome",
        "decided_at" (ISO-8601 UTC or None), "outcome_notice" ({"language", "text"}
        or None)}`` and ``created`` when given.

    Raises:
        ApiError: 404 ``appeal_not_found``.
    """
    appeal = None
    if isinstance(appeal_id, str) and len(appeal_id) <= MAX_APPEAL_ID:
        appeal = db.session.scalar(
            select(Appeal)
            .where(Appeal.id == appeal_id)
            .options(joinedload(Appeal.report), selectinload(Appeal.decisions))
        )
    if appeal is None or appeal.report.integration_id != integration_id:
        raise ApiError(404, "appeal_not_found", "No such appeal for this integration.")
    decision = latest_appeal_decision(appeal)
    notice = outcome_notice(db.session, appeal, decision)
    answer: dict[str, Any] = {
        "appeal_id": appeal.id,
        "external_id": appeal.external_id,
        "report_reference": appeal.report.public_reference,
        "state": appeal.state,
        "outcome": decision.outcome if decision else None,
        "decided_at": iso(decision.created_at) if decision else None,
        "outcome_notice": notice.as_json() if notice else None,
    }
    if created is not None:
        answer["created"] = created
    return answer
