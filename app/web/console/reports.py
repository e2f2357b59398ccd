from __future__ import annotations

from flask import abort, flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.bulk.subjects import canonical_reference
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.services.cases.reports import record_decision
from app.services.dsa.complaints import appeal_window
from app.services.dsa.settings import current_settings
from app.services.read import console as readmodels
from app.services.read import review as reviews
from app.services.read.protection import protected_marks
from app.services.read.temporary_actions import active_temporary_actions
from app.web.errors import raise_for_json
from app.web.labels import label

from ..decorators import role_required
from .blueprint import bp
from .forms import AppealForm, ReportDecisionForm

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")


@bp.route("/reports")
@role_required(*VIEW_ROLES)
def reports():
    return render_template(
        "reports/list.html",
        rows=readmodels.list_reports(current_user),
        temporary=active_temporary_actions(current_user.installation_id),  # TEMP-2: what is in force now
    )


def enforcement_words(result) -> str:
    """What a decision set going, in words: the workflows it started, or that none acts
    on it (a decision code no active workflow names enforces nothing)."""
    if result.replayed:
        return "It was recorded before; nothing was done twice."
    started = len(result.run_ids)
    if not started:
        return "No active workflow acts on this decision, so nothing is sent to the platform."
    return f"It started {started} enforcement workflow{'s' if started != 1 else ''}."


def decision_form(**kwargs) -> ReportDecisionForm:
    """The decision form, its codes read as labels; no decision is chosen at first (REV-3, REV-5)."""
    form = ReportDecisionForm(**kwargs)
    form.decision_code.choices = [SelectChoice("", "Choose a decision…")] + [
        SelectChoice(choice.value, label("decision", choice.value))
        for choice in form.decision_code.choices
        if choice.value
    ]
    return form


def _render(report_id: str, form=None, error=None, status=200):
    detail = readmodels.report_detail(current_user, report_id)
    if detail is None:
        abort(404)
    review = reviews.review_of(current_user.installation_id, report_id, [p.id for p in detail.proposals])
    references = review.subject.references | {t.target_reference for t in detail.targets} | {
        str(p.target.get("reference", "")) for p in detail.proposals if isinstance(p.target, dict)}
    appeal_until = appeal_window(db.session, detail.report, detail.decisions)  # DSA-5: the complaint window, if any
    marks = protected_marks(db.session, current_user.installation_id, references, [report_id])  # POL-4: one query
    return render_template(
        "reports/detail.html",
        d=detail,
        review=review,
        marks=marks,
        protected=[(reference, marks[canonical_reference(reference)]) for reference in sorted(references)
                   if canonical_reference(reference) in marks],
        form=form or decision_form(formdata=None),
        appeal_form=AppealForm(formdata=None),
        appeal_until=appeal_until,
        appeal_closed=appeal_until is not None and utcnow() > appeal_until,
        dsa_on=current_settings(db.session, current_user.installation_id).enabled,  # DSA-2: the rationale's hint
        error=error,
    ), status


@bp.route("/reports/<report_id>")
@role_required(*VIEW_ROLES)
def report(report_id: str):
    return _render(report_id)


@bp.route("/reports/<report_id>/decisions", methods=["POST"])
@role_required("moderator")
def report_decide(report_id: str):
    form = decision_form()
    if not form.validate():
        error = ApiError(400, "form_invalid", "Choose a decision.", "decision_code")
        raise_for_json(error)
        return _render(report_id, form, error, 400)
    try:
        result = record_decision(
            report_id,
            decision_code=form.decision_code.data,
            rationale=form.rationale.data or "",
            operator=current_user,
            idempotency_key=form.idempotency_key.data or None,
        )
    except ApiError as error:
        raise_for_json(error)
        return _render(report_id, form, error, error.status)
    flash(f"Decision recorded: {label('decision', form.decision_code.data)}. {enforcement_words(result)}", "ok")
    return redirect(url_for("console.report", report_id=report_id), code=303)


@bp.get("/reports/<report_id>/decisions")
@bp.get("/reports/<report_id>/appeals")
@role_required(*VIEW_ROLES)
def report_form_reloaded(report_id: str):
    """A reload of a refused form's page shows the report, not 405."""
    if readmodels.report_detail(current_user, report_id) is None:
        abort(404)
    return redirect(url_for("console.report", report_id=report_id), code=303)
