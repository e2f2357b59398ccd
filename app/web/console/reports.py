from __future__ import annotations

from flask import abort, redirect, render_template, url_for
from flask_login import current_user

from app.domain.errors import ApiError
from app.services.cases.reports import record_decision
from app.services.read import console as readmodels

from ..decorators import role_required
from .blueprint import bp
from .forms import AppealForm, ReportDecisionForm

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")


@bp.route("/reports")
@role_required(*VIEW_ROLES)
def reports():
    return render_template("reports/list.html", rows=readmodels.list_reports(current_user))


def _render(report_id: str, form=None, error=None, status=200):
    detail = readmodels.report_detail(current_user, report_id)
    if detail is None:
        abort(404)
    return render_template(
        "reports/detail.html",
        d=detail,
        form=form or ReportDecisionForm(formdata=None),
        appeal_form=AppealForm(formdata=None),
        error=error,
    ), status


@bp.route("/reports/<report_id>")
@role_required(*VIEW_ROLES)
def report(report_id: str):
    return _render(report_id)


@bp.route("/reports/<report_id>/decisions", methods=["POST"])
@role_required("moderator")
def report_decide(report_id: str):
    form = ReportDecisionForm()
    if not form.validate():
        return _render(report_id, form, ApiError(400, "form_invalid", "Choose a decision."), 400)
    try:
        record_decision(
            report_id,
            decision_code=form.decision_code.data,
            rationale=form.rationale.data or "",
            operator=current_user,
            idempotency_key=form.idempotency_key.data or None,
        )
    except ApiError as error:
        return _render(report_id, form, error, error.status)
    return redirect(url_for("console.report", report_id=report_id), code=303)


@bp.get("/reports/<report_id>/decisions")
@bp.get("/reports/<report_id>/appeals")
@role_required(*VIEW_ROLES)
def report_form_reloaded(report_id: str):
    """A reload of a refused form's page shows the report, not 405."""
    if readmodels.report_detail(current_user, report_id) is None:
        abort(404)
    return redirect(url_for("console.report", report_id=report_id), code=303)
