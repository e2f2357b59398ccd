"""Complaints against restrictions (SPEC §7 DSA-5; DSA Art. 20, 21): the complaint
window, a reversal recorded against the statement of reasons, and the appeal's
outcome notice.

Called by `app.services.cases.appeals` inside its unit of work, so each refusal
stores nothing and each record is written with the appeal decision it follows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from app.domain.dsa_appeal_notice import AppealNotice, notice_language, render_appeal_notice, template_language
from app.domain.errors import ApiError
from app.models import Appeal, AppealDecision, Decision, Report
from app.models.dsa import complaint_window_end, latest_statement, mark_reversed
from app.services.uow import Actor, UnitOfWork

from .settings import current_settings


def check_complaint_window(session, report: Report, decision_id: str, now: datetime) -> None:
    """Refuse an appeal filed after the complaint window of the contested decision
    (DSA-5, Art. 20(1)): the latest ``complaint_until`` of the statements of reasons
    of the actions that enforced it. A decision without a statement (DSA off, or
    nothing restricted) has no window here and is appealable as before.

    Args:
        session: the filing's session.
        report: the appealed report.
        decision_id: the decision the appeal contests (the report's latest).
        now: the filing time (aware UTC).

    Raises:
        ApiError: 409 ``appeal_window_closed``, naming the last moment a complaint
            could be filed.
    """
    until = complaint_window_end(session, report.installation_id, report.id, decision_id)
    if until is not None and now > until:
        raise ApiError(
            409,
            "appeal_window_closed",
            "The time to complain about this decision ended: appeals could be filed until"
            f" {until.astimezone(UTC):%Y-%m-%d %H:%M} UTC.",
        )


def appeal_window(session, report: Report, decisions: list[Decision]) -> datetime | None:
    """Until when the report's latest decision may be appealed (DSA-5), for the
    report page: the latest ``complaint_until`` of its statements of reasons; None
    when it has none (no window: appealable as before) or the report has no decision.
    One query.

    Args:
        session: a session.
        report: the report (its installation scopes the statements).
        decisions: the report's decisions, as the page loaded them (the latest is
            the one an appeal would contest, as `latest_decision` orders them).
    """
    latest = max(decisions, key=lambda d: (d.created_at, d.seq), default=None)
    if latest is None:
        return None
    return complaint_window_end(session, report.installation_id, report.id, latest.id)


def record_reversal(uow: UnitOfWork, appeal: Appeal, at: datetime, actor: Actor) -> list[str]:
    """Record on the contested decision's statements of reasons that the appeal
    reversed it (DSA-5): ``reversed_at`` and ``reversal_appeal_id``, once per
    statement (`mark_reversed`), each audited ``dsa.statement_reversed``.

    The Transparency Database is not told: its API creates statements and has no
    update or withdrawal, so a reversal lives in the console's records, which the
    transparency report counts (DSA-6).

    Args:
        uow: the appeal decision's unit of work.
        appeal: the appeal decided ``reversed``.
        at: the appeal decision's time (aware UTC).
        actor: the reviewer who decided it.

    Returns:
        The ids of the statements recorded as reversed now (empty on a repeat).
    """
    written = mark_reversed(
        uow.session, appeal.installation_id, appeal.report_id, appeal.decision_id, appeal_id=appeal.id, at=at
    )
    for statement_id in written:
        uow.audit(
            appeal.installation_id,
            f"dsa-statement-reversed:{statement_id}",
            "dsa.statement_reversed",
            actor,
            "dsa_statement",
            statement_id,
            {"appeal_id": appeal.id, "decision_id": appeal.decision_id},
        )
    return written


def outcome_notice(session, appeal: Appeal, decision: AppealDecision | None) -> AppealNotice | None:
    """The appeal's outcome notice (DSA-5), or None when there is none to give.

    Given when the appeal is decided and the contested decision has a statement of
    reasons or the installation has DSA on; in the language of the latest
    statement's affected user, else the settings' default. Rendered when asked from
    the appeal decision as it is now (a rationale redacted later is no longer in it)
    rather than stored: the platform reads it with the appeal
    (``GET /api/v1/appeals/{appeal_id}``) and the console shows it on the appeal page.

    Args:
        session: a session.
        appeal: the appeal.
        decision: its latest appeal decision, or None (not decided).
    """
    if decision is None:
        return None
    statement = latest_statement(session, appeal.installation_id, appeal.report_id, appeal.decision_id)
    language = template_language(statement.language) if statement else None
    if language is None:  # the settings only when the statement does not decide
        settings = current_settings(session, appeal.installation_id)
        if statement is None and not settings.enabled:
            return None
        language = notice_language(settings.default_language)
    reason = None if decision.rationale_redacted_at else decision.rationale
    return render_appeal_notice(
        outcome=decision.outcome, reason=reason, decided_at=decision.created_at, language=language
    )
