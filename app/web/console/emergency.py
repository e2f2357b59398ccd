"""Emergency action and its retrospective review (SPEC POL-6): the "Act now" form of
the proposal page, the review form, and the list of reviews."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user

from app.domain import emergency_action as rules
from app.domain.errors import ApiError
from app.services.lifecycle.emergency import act_in_emergency, review_emergency
from app.services.read import emergency_reviews as reads

from ..decorators import role_required
from ..errors import raise_for_json
from .blueprint import bp
from .emergency_panel import EmergencyForm, EmergencyReviewForm
from .proposals import _detail_or_404, _render_detail

LIST_ROLES = ("reviewer", "admin", "auditor", rules.EMERGENCY_ROLE)
VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")  # as the proposal page's


def _refused(proposal_id: str, error: ApiError):
    raise_for_json(error)
    return _render_detail(_detail_or_404(proposal_id), error=error, status=error.status)


@bp.route("/proposals/<proposal_id>/emergency", methods=["POST"])
@role_required(rules.EMERGENCY_ROLE)
def act_now(proposal_id: str):
    """Act alone in an emergency (POL-6): approved and sent at once, reviewed afterwards."""
    form = EmergencyForm()
    if not form.validate():
        return _refused(proposal_id, ApiError(400, "form_invalid", "Reload the page and try again."))
    try:
        result = act_in_emergency(
            proposal_id,
            reason=form.reason.data or "",
            payload_digest=(form.payload_digest.data or "").strip(),
            idempotency_key=form.idempotency_key.data,
            operator=current_user,
        )
    except ApiError as error:
        return _refused(proposal_id, error)
    flash(
        "You acted alone in an emergency: the action is sent now. A second reviewer must review it by "
        f"{result.due_at:%Y-%m-%d %H:%M} UTC.",
        "ok",
    )
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)


@bp.get("/proposals/<proposal_id>/emergency")
@role_required(*VIEW_ROLES)
def act_now_reloaded(proposal_id: str):
    """A reload of a refused emergency form shows the proposal, not 405."""
    _detail_or_404(proposal_id)  # another installation's proposal: 404
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)


@bp.route("/emergency-reviews")
@role_required(*LIST_ROLES)
def emergency_reviews():
    """Emergency actions and their retrospective reviews: open first, overdue first (POL-6)."""
    rows = reads.review_rows(current_user.installation_id)
    return render_template("emergency/list.html", rows=rows, overdue=sum(1 for r in rows if r.overdue))


@bp.route("/emergency-reviews/<review_id>", methods=["POST"])
@role_required("reviewer")
def review(review_id: str):
    """Agree or disagree with an emergency action; disagreeing proposes its compensation (POL-6)."""
    form = EmergencyReviewForm()
    proposal_id = reads.proposal_of_review(current_user.installation_id, review_id)
    if proposal_id is None:
        raise ApiError(404, "emergency_review_not_found", "No such emergency review.")
    if not form.validate():
        code = "emergency_review_verdict_invalid"
        return _refused(proposal_id, ApiError(400, code, rules.REFUSALS[code]))
    try:
        result = review_emergency(
            review_id, verdict=form.verdict.data, reason=form.reason.data or "", operator=current_user
        )
    except ApiError as error:
        return _refused(proposal_id, error)
    if result.compensation_proposal_id:
        flash("You disagreed. The compensation is proposed; another reviewer must approve it.", "ok")
        return redirect(url_for("console.proposal", proposal_id=result.compensation_proposal_id), code=303)
    agreed = result.state == rules.ReviewState.AGREED.value
    words = "agreed" if agreed else "disagreed (this action names no compensation)"
    flash(f"You {words}. The review is recorded.", "ok")
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)
