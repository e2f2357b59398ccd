from __future__ import annotations

from flask import abort, flash, redirect, render_template, url_for
from flask_login import current_user

from app.domain.case_states import OPEN_CORRECTION_STATES
from app.domain.dsa_appeal_notice import LANGUAGE_NAMES
from app.domain.errors import ApiError
from app.domain.proposal.lead import appeal_lead
from app.extensions import db
from app.services.cases.appeal_corrections import approvable_corrections, record_manual_correction
from app.services.cases.appeals import decide_appeal, file_appeal, redact_rationale
from app.services.dsa.complaints import outcome_notice
from app.services.read import console as readmodels
from app.services.read import review as reviews
from app.services.read.appeal_status import latest_appeal_decision
from app.services.uow import Actor
from app.web.errors import raise_for_json
from app.web.labels import label

from ..decorators import role_required
from .blueprint import bp
from .forms import AppealDecisionForm, AppealForm, EmptyForm, ManualCorrectionForm

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")


@bp.route("/appeals")
@role_required(*VIEW_ROLES)
def appeals():
    return render_template("appeals/list.html", rows=readmodels.list_appeals(current_user))


def _lead(detail):
    """What the appeal page says first (QUEUE-6): its state, the outcome, what is left."""
    latest = latest_appeal_decision(detail.appeal)
    return appeal_lead(
        detail.appeal.state,
        outcome=latest.outcome if latest else None,
        open_corrections=sum(1 for v in detail.corrections if v.correction.state in OPEN_CORRECTION_STATES),
        can_decide=bool(detail.can_decide.allowed),
        refusal=detail.can_decide.reason or "",
    )


def _render(appeal_id: str, decision_form=None, manual_form=None, error=None, status=200):
    detail = readmodels.appeal_detail(current_user, appeal_id)
    if detail is None:
        abort(404)
    contested = reviews.contested_actions(detail.report.id, detail.appeal.decision_id)
    review = reviews.review_of(current_user.installation_id, detail.report.id, [p.id for p in contested])
    notice = outcome_notice(db.session, detail.appeal, latest_appeal_decision(detail.appeal))  # DSA-5
    return render_template(
        "appeals/detail.html",
        d=detail,
        lead=_lead(detail),
        notice=notice,
        notice_language=LANGUAGE_NAMES.get(notice.language, notice.language) if notice else None,
        review=review,
        contested_actions=contested,
        error=error,
        empty_form=EmptyForm(),
        decision_form=decision_form or AppealDecisionForm(formdata=None),
        manual_form=manual_form or ManualCorrectionForm(formdata=None),
    ), status


@bp.route("/appeals/<appeal_id>")
@role_required(*VIEW_ROLES)
def appeal(appeal_id: str):
    return _render(appeal_id)


@bp.route("/reports/<report_id>/appeals", methods=["POST"])
@role_required("moderator", "reviewer")
def file_appeal_view(report_id: str):
    form = AppealForm()
    if not form.validate():
        raise ApiError(400, "form_invalid", "Write the appellant's statement (up to 5,000 characters).")
    result = file_appeal(
        report_id,
        statement=form.statement.data or "",
        actor=Actor("operator", current_user.id),
        installation_id=current_user.installation_id,
    )
    flash("Appeal filed. A reviewer who did not make the decision will decide it.", "ok")
    return redirect(url_for("console.appeal", appeal_id=result.appeal_id), code=303)


@bp.route("/appeals/<appeal_id>/decision", methods=["POST"])
@role_required("reviewer")
def appeal_decide(appeal_id: str):
    form = AppealDecisionForm()
    if not form.validate():
        error = ApiError(400, "form_invalid", "Choose an outcome.", "outcome")
        raise_for_json(error)
        return _render(appeal_id, decision_form=form, error=error, status=400)
    try:
        result = decide_appeal(
            appeal_id, outcome=form.outcome.data, rationale=form.rationale.data or "", operator=current_user
        )
    except ApiError as error:
        raise_for_json(error)
        return _render(appeal_id, decision_form=form, error=error, status=error.status)
    follow = _follow_up(result.correction_ids)
    flash(f"Appeal outcome recorded: {label('appeal_outcome', form.outcome.data)}.{follow}", "ok")
    return redirect(url_for("console.appeal", appeal_id=appeal_id), code=303)


def _follow_up(correction_ids: list[str]) -> str:
    """What the decision leaves to do, counted for this viewer (issue 25): only the
    corrections they may approve; the others say why another reviewer must."""
    allowed, reasons = approvable_corrections(current_user, correction_ids)
    others = len(correction_ids) - allowed
    text = f" {allowed} correction{'s' if allowed != 1 else ''} for you to approve next." if allowed else ""
    if others:
        waits = f"{others} correction{'s wait' if others != 1 else ' waits'} for another reviewer"
        text += f" {waits}: {' '.join(reasons)}" if reasons else f" {waits}."
    return text


@bp.route("/appeals/<appeal_id>/decisions/<decision_id>/redact", methods=["POST"])
@role_required("admin")
def redact(appeal_id: str, decision_id: str):
    try:
        redact_rationale(decision_id, operator=current_user, appeal_id=appeal_id)
    except ApiError as error:
        raise_for_json(error)
        return _render(appeal_id, error=error, status=error.status)
    flash("Rationale redacted.", "ok")
    return redirect(url_for("console.appeal", appeal_id=appeal_id), code=303)


@bp.route("/appeals/<appeal_id>/corrections/<correction_id>/record", methods=["POST"])
@role_required("reviewer")
def record_correction(appeal_id: str, correction_id: str):
    form = ManualCorrectionForm()
    if not form.validate():
        error = ApiError(400, "form_invalid", "Describe what was done.", "note")
        raise_for_json(error)
        return _render(appeal_id, manual_form=form, error=error, status=400)
    try:
        record_manual_correction(correction_id, note=form.note.data or "", operator=current_user, appeal_id=appeal_id)
    except ApiError as error:
        raise_for_json(error)
        return _render(appeal_id, manual_form=form, error=error, status=error.status)
    flash("Manual correction recorded.", "ok")
    return redirect(url_for("console.appeal", appeal_id=appeal_id), code=303)


@bp.get("/appeals/<appeal_id>/decision")
@role_required(*VIEW_ROLES)
def appeal_form_reloaded(appeal_id: str):
    """A reload of a refused form's page shows the appeal, not 405."""
    if readmodels.appeal_detail(current_user, appeal_id) is None:
        abort(404)
    return redirect(url_for("console.appeal", appeal_id=appeal_id), code=303)
