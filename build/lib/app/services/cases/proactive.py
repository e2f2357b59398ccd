"""A report nobody sent: a moderator opens one in the console for a subject the
platform has not reported (a proactive action, SPEC QUEUE-1; issue 25). It joins the
queue like any report and is decided like one; it says who opened it."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.domain.case_states import ReportState
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.text_safety import reference_problem
from app.models import Integration, OperatorUser, Report, ReportTarget
from app.models.base import new_id
from app.services.cases.queue_subjects import refresh_subjects, subject_for
from app.services.uow import Actor, unit_of_work

# the intake's reference and kind rules (OpenAPI ReportIntake, FOUR-10)
REFERENCE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,50}:\S{1,440}$")
KIND_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,49}$")
WORD_LIMIT = 100
SUMMARY_LIMIT = 5000


def _checked(reference: str, kind: str, category: str, reason: str, summary: str) -> tuple[str, ...]:
    reference = (reference or "").strip()
    if not REFERENCE_PATTERN.match(reference):
        raise ApiError(400, "report_reference_invalid",
                       "Give the subject's reference like post:123, user:5120 or an at:// address.", "reference")
    problem = reference_problem(reference, "reference")
    if problem:
        raise ApiError(400, "reference_characters", problem, "reference")
    kind = (kind or "content").strip()
    if not KIND_PATTERN.match(kind):
        raise ApiError(400, "report_kind_invalid", "The kind is a short word in lower case, e.g. post.", "kind")
    words = [(value or "").strip() for value in (category, reason)]
    for name, value in zip(("category", "reason"), words, strict=True):
        if len(value) > WORD_LIMIT:
            raise ApiError(400, "report_invalid", f"The {name} is limited to {WORD_LIMIT} characters.", name)
    summary = (summary or "").strip()
    if not summary or len(summary) > SUMMARY_LIMIT:
        raise ApiError(400, "report_summary_invalid",
                       "Say why you open this report (1 to 5,000 characters).", "summary")
    return reference, kind, *words, summary


def _integration(session, operator: OperatorUser, integration_id: str | None) -> Integration:
    integrations = session.scalars(select(Integration).where(
        Integration.installation_id == operator.installation_id).order_by(Integration.name)).all()
    if integration_id:
        chosen = next((item for item in integrations if item.id == integration_id), None)
        if chosen is None:
            raise ApiError(400, "integration_not_found", "Choose one of the listed platforms.", "integration_id")
        return chosen
    if len(integrations) != 1:
        raise ApiError(400, "integration_required" if integrations else "integration_not_found",
                       "Choose the platform the subject is on." if integrations
                       else "No platform is connected to this installation yet.", "integration_id")
    return integrations[0]


def open_report(operator: OperatorUser, *, reference: str, kind: str = "content", category: str = "",
                reason: str = "", summary: str, integration_id: str | None = None) -> Report:
    """Open a report in the console about a subject nobody reported (proactive).

    Args:
        operator: a moderator; recorded as ``opened_by_id``.
        reference: the subject, e.g. ``user:5120`` (the intake's rules: ``prefix:rest``
            of at most 500 characters, no invisible or lookalike character, FOUR-10).
        kind: the target's kind (``post``, ``account``...).
        category, reason: words up to 100 characters each (may be empty).
        summary: why, 1..5,000 characters.
        integration_id: the platform; needed only when the installation has several.

    Returns:
        The new open report (its external id ``console:<report id>``), in the queue
        under its subject; audited ``report.opened_in_console``.

    Raises:
        ApiError: 400 ``report_reference_invalid``, ``reference_characters``,
            ``report_kind_invalid``, ``report_invalid``, ``report_summary_invalid``,
            ``integration_required``, ``integration_not_found``. Nothing is stored.
    """
    reference, kind, category, reason, summary = _checked(reference, kind, category, reason, summary)
    from app.services.cases.reports import _public_reference

    with unit_of_work() as uow:
        session = uow.session
        integration = _integration(session, operator, integration_id)
        now = utcnow()
        subject = subject_for(session, operator.installation_id, reference, now)
        report_id = new_id("rep")
        report = Report(id=report_id, installation_id=operator.installation_id, integration_id=integration.id,
                        subject_id=subject.id, queue_id=integration.default_queue_id,
                        external_id=f"console:{report_id}", public_reference=_public_reference(),
                        state=ReportState.OPEN, category=category, reason=reason, summary=summary,
                        opened_by_id=operator.id, created_at=now, updated_at=now)
        session.add(report)
        session.flush()
        session.add(ReportTarget(installation_id=report.installation_id, report_id=report.id,
                                 target_reference=reference, kind=kind, position=0))
        session.flush()
        refresh_subjects(session, [subject.id], now)
        uow.audit(report.installation_id, f"report-opened:{report.id}", "report.opened_in_console",
                  Actor("operator", operator.id), "report", report.id,
                  {"reference": reference, "kind": kind, "integration_id": integration.id,
                   "category": category, "reason": reason})
        uow.commit()
    return report


def integration_choices(operator: OperatorUser) -> list[tuple[str, str]]:
    """(id, name) of the platforms a proactive report can be about, by name."""
    from app.extensions import db

    return [(row.id, row.name) for row in db.session.execute(select(Integration.id, Integration.name).where(
        Integration.installation_id == operator.installation_id).order_by(Integration.name))]
