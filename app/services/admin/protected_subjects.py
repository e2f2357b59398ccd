"""Protected subjects (SPEC POL-4): the list for the admin page, and an admin's
proposal to mark a subject protected or to unmark it, applied when a second admin
approves it by its digest (FOUR-2). A mark decides which policy an action on the
subject needs, so both directions wait for a second admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update

from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind, ChangeState
from app.domain.errors import ApiError
from app.domain.protected import ProtectionMark, check_mark, check_reason
from app.extensions import db
from app.models import ConfigChange, OperatorUser, ProtectedSubject, ReportEvidence
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import plausible_id
from app.services.read.protection import mark_of
from app.services.uow import UnitOfWork, unit_of_work

LIST_LIMIT = 500
P = ProtectedSubject


@dataclass(frozen=True)
class ProtectedRow:
    """A protected subject for the admin page: its mark and the name the reports'
    evidence gives it (platform text), if any."""

    mark: ProtectionMark
    name: str | None


def _active(session, installation_id: str, reference: str) -> ProtectedSubject | None:
    return session.scalar(
        select(P).where(P.installation_id == installation_id, P.subject_reference == reference,
                        P.unmarked_at.is_(None)).order_by(P.marked_at).limit(1)
    )


def protected_subjects(installation_id: str) -> list[ProtectedRow]:
    """The subjects protected now, newest first (at most 500), each with its name
    when a report's evidence gives one (two queries in all)."""
    rows = db.session.scalars(
        select(P).where(P.installation_id == installation_id, P.unmarked_at.is_(None))
        .order_by(P.marked_at.desc(), P.id).limit(LIST_LIMIT)
    ).all()
    refs = {row.subject_reference for row in rows}
    names: dict[str, str] = {}
    if refs:
        found = db.session.execute(  # one row per subject, however many posts by them
            select(ReportEvidence.author_reference, func.max(ReportEvidence.author_name)).where(
                ReportEvidence.installation_id == installation_id, ReportEvidence.author_reference.in_(refs),
                ReportEvidence.author_name.is_not(None)).group_by(ReportEvidence.author_reference)
        )
        names = {reference: name for reference, name in found}
    return [ProtectedRow(mark_of(row), names.get(row.subject_reference)) for row in rows]


def pending_protection_changes(installation_id: str) -> list[ConfigChange]:
    """Marking and unmarking changes waiting for a second admin, oldest first."""
    kinds = (ChangeKind.SUBJECT_PROTECT.value, ChangeKind.SUBJECT_UNPROTECT.value)
    return list(db.session.scalars(
        select(ConfigChange).where(ConfigChange.installation_id == installation_id, ConfigChange.kind.in_(kinds),
                                   ConfigChange.state == ChangeState.PENDING.value)
        .order_by(ConfigChange.created_at)
    ))


# -- marking -------------------------------------------------------------------------


def _apply_mark(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    kind, reference, reason = check_mark(content["kind"], content["reference"], content["reason"])
    if _active(uow.session, context.installation_id, reference) is not None:
        raise ApiError(409, "protected_subject_already", f"{reference} is protected already.", "reference")
    row = P(installation_id=context.installation_id, kind=kind, subject_reference=reference, reason=reason,
            marked_change_id=context.change_id, marked_at=utcnow())
    uow.session.add(row)
    uow.session.flush()
    uow.audit(context.installation_id, f"protected-subject-marked:{row.id}", "protected_subject.marked",
              context.actor, "protected_subject", row.id,
              context.details({"kind": kind, "reference": reference, "reason": reason}))
    return {"protected_subject_id": row.id}


def _mark_summary(content: dict[str, Any], _current) -> str:
    return f"Protect the {content['kind']} {content['reference']}"


SUBJECT_PROTECT = ChangeType(
    kind=ChangeKind.SUBJECT_PROTECT,
    subject_type="protected_subject",
    subject=lambda content: content["reference"],
    summary=_mark_summary,
    apply=_apply_mark,
)


def propose_mark(operator: OperatorUser, kind: Any, reference: Any, reason: Any) -> PendingChange:
    """Propose marking an account or an author protected (POL-4), stored for a second
    admin (FOUR-2).

    Args:
        operator: an admin of the installation.
        kind: ``account`` or ``author`` (every target by them).
        reference: the subject, e.g. ``user:5120`` (stored in its canonical spelling).
        reason: 3..2,000 characters.

    Returns:
        The `PendingChange` stored.

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 400 ``protected_kind_invalid``,
            ``protected_reference_invalid``, ``protected_reference_suspicious``,
            ``protected_reason_invalid``; 409 ``protected_subject_already``. Nothing is
            stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose protecting a subject.")
    kind, reference, reason = check_mark(kind, reference, reason)
    with unit_of_work() as uow:
        outcome = submit(uow, operator, SUBJECT_PROTECT, {"kind": kind, "reference": reference, "reason": reason})
        uow.commit()
    return outcome


# -- unmarking -----------------------------------------------------------------------


def _owned(session, installation_id: str, protected_id: Any) -> ProtectedSubject:
    row = session.get(P, protected_id) if plausible_id(protected_id) else None
    if row is None or row.installation_id != installation_id:
        raise ApiError(404, "protected_subject_not_found", "No such protected subject.")
    return row


def _current_mark(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    row = _owned(session, installation_id, content["protected_id"])
    return {"kind": row.kind, "reference": row.subject_reference, "protected": row.unmarked_at is None,
            "reason": row.reason}


def _apply_unmark(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    row = _owned(uow.session, context.installation_id, content["protected_id"])
    reason = check_reason(content["reason"])
    done = uow.session.execute(
        update(P).where(P.id == row.id, P.unmarked_at.is_(None))
        .values(unmarked_at=utcnow(), unmarked_change_id=context.change_id)
        .execution_options(synchronize_session=False)
    ).rowcount
    if done != 1:
        raise ApiError(409, "protected_subject_not_protected", f"{row.subject_reference} is not protected.")
    uow.audit(context.installation_id, f"protected-subject-unmarked:{row.id}", "protected_subject.unmarked",
              context.actor, "protected_subject", row.id,
              context.details({"kind": row.kind, "reference": row.subject_reference, "reason": reason}))
    return {"protected_subject_id": row.id}


def _unmark_display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict, dict]:
    now = dict(current or {})
    now.pop("reason", None)
    return now, {**now, "protected": False, "reason": content["reason"]}


SUBJECT_UNPROTECT = ChangeType(
    kind=ChangeKind.SUBJECT_UNPROTECT,
    subject_type="protected_subject",
    subject="protected_id",
    current=_current_mark,
    summary=lambda content, _current: f"Unprotect the {content['kind']} {content['reference']}",
    apply=_apply_unmark,
    display=_unmark_display,
)


def propose_unmark(operator: OperatorUser, protected_id: Any, reason: Any) -> PendingChange:
    """Propose unmarking a protected subject (POL-4), stored for a second admin (FOUR-2).

    Args:
        operator: an admin of the installation.
        protected_id: the `ProtectedSubject` row's id.
        reason: 3..2,000 characters.

    Raises:
        ApiError: 403 ``forbidden``; 400 ``protected_reason_invalid``; 404
            ``protected_subject_not_found`` (also another installation's); 409
            ``protected_subject_not_protected`` (unmarked already). Nothing is stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose unprotecting a subject.")
    with unit_of_work() as uow:
        row = _owned(uow.session, operator.installation_id, protected_id)
        reason = check_reason(reason)
        if row.unmarked_at is not None:
            raise ApiError(409, "protected_subject_not_protected", f"{row.subject_reference} is not protected.")
        content = {"protected_id": row.id, "kind": row.kind, "reference": row.subject_reference, "reason": reason}
        outcome = submit(uow, operator, SUBJECT_UNPROTECT, content)
        uow.commit()
    return outcome
