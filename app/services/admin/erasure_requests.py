"""Erasure requests and retention periods, decided by two admins (SPEC OPS-4).

An admin asks to erase a subject's personal data, or to set the installation's
retention period, with a reason; a different admin approves (or rejects) it. Setting a
retention period is four-eyes too: shortening it erases data at the next sweep. On
approval, in one transaction, the request is marked approved, the data erased
(`app.services.cases.erasure`) and the erasure audited with its counts, never with
the erased text. A rejected request changes nothing but its own state.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update

from app.domain.clock import utcnow
from app.domain.personal_data import (
    ErasedBy,
    ErasureKind,
    ErasureState,
    check_decision,
    check_reason,
    check_subject,
    parse_retention_days,
)
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ErasureRequest, OperatorUser, RetentionSetting, new_id
from app.services.cases.erasure import erase_reports, retention_days, subject_report_ids, subject_spellings
from app.services.uow import Actor, unit_of_work


def _admin(operator: OperatorUser) -> None:
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only an admin asks for or decides an erasure.")


def request_erasure(operator: OperatorUser, subject: object, reason: object) -> ErasureRequest:
    """Ask a second admin to erase a subject's personal data (OPS-4); nothing is erased yet.

    Args:
        operator: an admin.
        subject: the subject's reference, e.g. ``user:5120`` or ``post:1003``.
        reason: who asked and why (12+ visible characters in 2+ words).

    Returns:
        The pending request (audited ``erasure.requested``).

    Raises:
        ApiError: 403 ``forbidden``; 400 ``erasure_subject_invalid``,
            ``erasure_reason_invalid``. Nothing is stored.
    """
    _admin(operator)
    reference, why = check_subject(subject), check_reason(reason)
    return _store(operator, ErasureKind.SUBJECT, why, subject_reference=reference)


def request_retention(operator: OperatorUser, days: object, reason: object) -> ErasureRequest:
    """Ask a second admin to set the retention period of closed cases (OPS-4).

    Args:
        days: whole days from 1 to 36,500, or empty to keep personal data.

    Raises:
        ApiError: 403 ``forbidden``; 400 ``retention_days_invalid``,
            ``erasure_reason_invalid``; 409 ``retention_unchanged`` (already so).
    """
    _admin(operator)
    value, why = parse_retention_days(days), check_reason(reason)
    if value == retention_days(db.session, operator.installation_id):
        raise ApiError(409, "retention_unchanged", "The retention period is that already; nothing to approve.", "days")
    return _store(operator, ErasureKind.RETENTION, why, retention_days=value)


def _store(operator: OperatorUser, kind: ErasureKind, reason: str, **content) -> ErasureRequest:
    with unit_of_work() as uow:
        row = ErasureRequest(id=new_id("era"), installation_id=operator.installation_id, kind=kind.value,
                             reason=reason, state=ErasureState.PENDING.value, requested_by=operator.id,
                             counts={}, created_at=utcnow(), **content)
        uow.session.add(row)
        uow.session.flush()
        uow.audit(operator.installation_id, f"erasure:requested:{row.id}", "erasure.requested",
                  Actor("operator", operator.id), "erasure_request", row.id,
                  {"kind": kind.value, **content, "reason": reason})
        uow.commit()
    return row


def _locked(session, operator: OperatorUser, request_id: str) -> ErasureRequest:
    row = session.scalar(select(ErasureRequest).where(
        ErasureRequest.id == request_id, ErasureRequest.installation_id == operator.installation_id,
    ).with_for_update())
    if row is None:
        raise ApiError(404, "erasure_not_found", "No such erasure request.")
    check_decision(row.state, row.requested_by, operator.id)
    return row


def _decided(session, row: ErasureRequest, state: ErasureState, operator: OperatorUser, now, **values) -> None:
    """Move a pending request to `state`: one guarded UPDATE (still pending), on the row
    this transaction locked."""
    moved = session.execute(
        update(ErasureRequest).where(ErasureRequest.id == row.id, ErasureRequest.state == ErasureState.PENDING.value)
        .values(state=state.value, decided_by=operator.id, decided_at=now, **values)
        .execution_options(synchronize_session=False)).rowcount
    if moved != 1:
        raise ApiError(409, "erasure_not_pending", "This request was decided already; nothing changed.")
    session.expire(row)


def approve(operator: OperatorUser, request_id: str) -> ErasureRequest:
    """Approve another admin's request and apply it in the same transaction (OPS-4).

    A subject erasure empties the personal data of every report about the subject,
    under any stored spelling of its reference (`subject_spellings`, `subject_report_ids`),
    and the queue rows naming it as author; a retention request
    sets the period (the sweep erases what is due). Audited ``erasure.approved`` with
    the counts per table.

    Raises:
        ApiError: 403 ``forbidden``, ``erasure_same_admin``; 404 ``erasure_not_found``;
            409 ``erasure_not_pending``. Nothing changes.
    """
    _admin(operator)
    with unit_of_work() as uow:
        session, now = uow.session, utcnow()
        row = _locked(session, operator, request_id)
        details = {"kind": row.kind, "requested_by": row.requested_by}
        if row.kind == ErasureKind.SUBJECT.value:
            reference = row.subject_reference or ""
            spellings = subject_spellings(session, row.installation_id, reference)
            ids = subject_report_ids(session, row.installation_id, spellings)
            counts = erase_reports(session, row.installation_id, ids, ErasedBy.REQUEST, now, author_references=spellings)
            details |= {"subject_reference": reference, "reports": len(ids), "counts": counts.as_dict()}
            _decided(session, row, ErasureState.APPROVED, operator, now, counts=counts.as_dict())
        else:
            _set_retention(session, row, now)
            details |= {"retention_days": row.retention_days}
            _decided(session, row, ErasureState.APPROVED, operator, now)
        uow.audit(row.installation_id, f"erasure:approved:{row.id}", "erasure.approved",
                  Actor("operator", operator.id), "erasure_request", row.id, details)
        uow.commit()
    return row


def _set_retention(session, row: ErasureRequest, now) -> None:
    setting = session.scalar(select(RetentionSetting).where(RetentionSetting.installation_id == row.installation_id)
                             .with_for_update())
    if setting is None:
        setting = RetentionSetting(id=new_id("ret"), installation_id=row.installation_id)
        session.add(setting)
    setting.closed_case_days, setting.request_id, setting.updated_at = row.retention_days, row.id, now


def reject(operator: OperatorUser, request_id: str) -> ErasureRequest:
    """Reject another admin's request: nothing is erased (OPS-4); audited ``erasure.rejected``.

    Raises:
        ApiError: as `approve`.
    """
    _admin(operator)
    with unit_of_work() as uow:
        row = _locked(uow.session, operator, request_id)
        _decided(uow.session, row, ErasureState.REJECTED, operator, utcnow())
        uow.audit(row.installation_id, f"erasure:rejected:{row.id}", "erasure.rejected",
                  Actor("operator", operator.id), "erasure_request", row.id, {"kind": row.kind})
        uow.commit()
    return row


@dataclass(frozen=True)
class ErasurePage:
    requests: list[tuple[ErasureRequest, str, str | None]]  # (request, requester's name, decider's name)
    retention_days: int | None


def erasure_page(installation_id: str, limit: int = 200) -> ErasurePage:
    """The installation's requests, newest first, with who asked and who decided."""
    names = dict(db.session.execute(select(OperatorUser.id, OperatorUser.display_name)
                                    .where(OperatorUser.installation_id == installation_id)).all())
    rows = db.session.scalars(select(ErasureRequest).where(ErasureRequest.installation_id == installation_id)
                              .order_by(ErasureRequest.created_at.desc(), ErasureRequest.id).limit(limit)).all()
    return ErasurePage([(r, names.get(r.requested_by, r.requested_by), names.get(r.decided_by or ""))
                        for r in rows], retention_days(db.session, installation_id))
