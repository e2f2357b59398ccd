from __future__ import annotations

import json
from dataclasses import replace

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.domain.approval_policy import policies_of
from app.domain.dsa_submission_words import refusal_lines
from app.domain.errors import ApiError
from app.domain.landing import landing_endpoint
from app.domain.proposal import temporary as temporary_rules
from app.domain.proposal.lead import proposal_lead
from app.domain.proposal.offers import CHANGE_ROLES, OPERATOR_ROLES
from app.domain.states import ProposalState
from app.extensions import db
from app.services.lifecycle.approval import decide_proposal
from app.services.lifecycle.votes import approver_of, eligible_policies
from app.services.lifecycle.compensation import propose_compensation
from app.services.lifecycle.proposals import delivery_of
from app.services.lifecycle.retry import retry_proposal
from app.services.lifecycle.retry_now import retry_now, retry_now_allowed
from app.services.lifecycle.cancel_scheduled import cancel_scheduled
from app.services.lifecycle.reversals import propose_change
from app.services.read import bulk_batches as bulk_reads
from app.services.read import console as readmodels
from app.services.read.component_choices import action_components
from app.services.read.dsa_statements import statement_of, why_pending_waits
from app.services.read import review as reviews
from app.services.read.approving import approving
from app.services.read.restriction_notice import noticed_restriction, restriction_notice
from app.services.read.reversibility import irreversible_note
from app.services.read.temporary_actions import temporary_view
from app.web.errors import raise_for_json
from app.web.formatting import pretty_json
from app.web.labels import label

from ..decorators import is_htmx, role_required
from .blueprint import bp
from .emergency_panel import emergency_panel_for
from .forms import CompensationForm, DecisionForm, EmptyForm, RetryForm, RetryNowForm, TemporaryChangeForm

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")


def _filters() -> readmodels.ProposalFilters:
    state = request.args.get("state") or None
    if state not in (None, *[s.value for s in ProposalState]):
        state = None
    return readmodels.ProposalFilters(
        state=state,
        queue_id=request.args.get("queue") or None,
        action_code=(request.args.get("action") or None),
        needs_my_approval=request.args.get("mine") == "1",
        failed=request.args.get("failed") == "1",
    )


@bp.route("/")
@role_required()
def index():
    """Each role lands on its own work (QUEUE-5)."""
    return redirect(url_for(landing_endpoint(current_user.roles)))


@bp.route("/proposals")
@role_required(*VIEW_ROLES)
def proposals():
    filters = _filters()
    page = readmodels.list_proposals(current_user, filters, request.args.get("after"))
    next_url = (
        url_for("console.proposals", **{**request.args.to_dict(), "after": page.next_cursor})
        if page.next_cursor
        else None
    )
    template = "proposals/_rows.html" if is_htmx() else "proposals/list.html"
    undo = reviews.undo_marks(row["proposal"].id for row in page.rows)
    return render_template(template, page=page, filters=filters, next_url=next_url, undo=undo)


def _detail_or_404(proposal_id: str) -> readmodels.ProposalDetail:
    detail = readmodels.proposal_detail(current_user, proposal_id, all_audit=request.args.get("audit") == "all")
    if detail is None:
        abort(404)
    return detail


def _compensation_form(detail, formdata=None) -> CompensationForm:
    p = detail.proposal
    form = CompensationForm(formdata=formdata, target=pretty_json(p.target), payload=pretty_json(p.payload))
    form.component_version_id.choices = action_components(current_user.installation_id)
    return form


def _retry_form(detail) -> RetryForm | None:
    """The retry form, when the page offers a retry (RTRY-1)."""
    if not detail.offers.retry:
        return None
    return RetryForm(formdata=None, payload_digest=detail.proposal.payload_digest)


def _lead_context(detail) -> dict:
    """What the page says first (QUEUE-6): the lead, and the "retry now" form when the
    viewer may start the next attempt at once."""
    p = detail.proposal
    can_retry_now = current_user.has_role(*OPERATOR_ROLES) and retry_now_allowed(p)
    lead = proposal_lead(
        p.state,
        p.delivery_terminal,
        accepted=p.accepted_at is not None,
        can_decide=bool(detail.offers.decide.allowed),
        can_retry=bool(detail.offers.retry.allowed),
        can_retry_now=can_retry_now,
        approval_counts=detail.votes.approval_counts if detail.votes else True,
        missing=detail.votes.missing if detail.votes else None,
    )
    emergency = open_review = None
    if p.emergency:  # POL-6: an open retrospective review is what comes next
        emergency = emergency_panel_for(p)
        review = emergency["panel"].review
        if review is not None and review.state == "open":
            open_review = review
            lead = replace(lead, next_step="")
    return {
        "lead": lead,
        "retry_now_form": RetryNowForm(formdata=None) if can_retry_now else None,
        "emergency": emergency,
        "emergency_review": open_review,
    }


def _reason_required(p) -> bool:
    """Whether the viewer's rejection needs a reason: a policy recorded on the proposal
    that admits them says ``reason_on_reject`` (POL-1), as `decide_proposal` checks."""
    policies = eligible_policies(policies_of(p.approval_route), approver_of(current_user))
    return any(policy.reason_on_reject for policy in policies)


def _render_detail(detail, decision_form=None, retry_form=None, error=None, status=200, compensation_form=None):
    """The detail page; each form is built only when the page offers it (`detail.offers`)."""
    p = detail.proposal
    if decision_form is None and detail.offers.decide:
        decision_form = DecisionForm(formdata=None)
    if decision_form is not None and _reason_required(p):
        decision_form.reason.label.text = "Reason (required to reject: this policy needs one; 3–2,000 characters)"
    retry_form = retry_form or _retry_form(detail)
    if compensation_form is None and detail.offers.compensate:
        compensation_form = _compensation_form(detail)
    subject = (p.target_reference or (p.target or {}).get("reference")) if p.bulk_batch_id else None
    review = reviews.review_of(current_user.installation_id, p.report_id, [p.id], subject_reference=subject)
    statement = statement_of(db.session, p.id)  # DSA-3: the panel, only when a statement exists
    return render_template(
        "proposals/detail.html",
        statement=statement,
        statement_lines=refusal_lines(statement.last_error) if statement else [],
        statement_waits=why_pending_waits(db.session, statement),
        bulk_reference=bulk_reads.public_reference_of(current_user, p.bulk_batch_id) if p.bulk_batch_id else None,
        **_temporary_context(detail),
        **_lead_context(detail),
        d=detail,
        review=review,
        undo=review.undo,
        decision_form=decision_form,
        retry_form=retry_form,
        compensation_form=compensation_form,
        error=error,
        poll_seconds=current_app.config["CONSOLE_POLL_SECONDS"],
        approving=approving([p], label) if detail.offers.decide.shown else {},  # FOUR-5
        irreversible=irreversible_note(p) if detail.offers.decide.shown else None,  # POL-5
        dsa_notice=restriction_notice(statement),  # DSA-4
        dsa_noticed_restriction=noticed_restriction(p),
    ), status


@bp.route("/proposals/<proposal_id>")
@role_required(*VIEW_ROLES)
def proposal(proposal_id: str):
    return _render_detail(_detail_or_404(proposal_id))


@bp.route("/proposals/<proposal_id>/live")
@role_required(*VIEW_ROLES)
def proposal_live(proposal_id: str):
    """The self-refreshing part of the detail page; stops polling once terminal."""
    detail = _detail_or_404(proposal_id)
    p = detail.proposal
    return render_template(
        "proposals/_live.html",
        d=detail,
        poll_seconds=current_app.config["CONSOLE_POLL_SECONDS"],
        retry_form=_retry_form(detail),
        undo=reviews.undo_marks([p.id]),
        **_lead_context(detail),
        **_temporary_context(detail),  # the end time appears once applied, no reload (QUEUE-6)
        lead_oob=True,
    )


def _temporary_context(detail) -> dict:
    """The temporary panel's values (TEMP-1..4): plan, reversals, countdown, and the
    forms of what `detail.offers` opens (cancel, end now, extend)."""
    p = detail.proposal
    o = detail.offers
    return {
        "temporary": temporary_view(p),
        "scheduled_waiting": temporary_rules.waits_scheduled(delivery_of(p)),
        "change_form": TemporaryChangeForm(formdata=None) if o.end_now.shown or o.extend.shown else None,
        "cancel_form": EmptyForm(formdata=None) if o.cancel.shown else None,
    }


@bp.route("/proposals/<proposal_id>/temporary")
@role_required(*VIEW_ROLES)
def proposal_temporary(proposal_id: str):
    """The temporary panel alone: it follows a temporary action until its reversal
    ends it, then stops polling (TEMP-2)."""
    detail = _detail_or_404(proposal_id)
    return render_template(
        "proposals/_temporary.html",
        d=detail,
        poll_seconds=current_app.config["CONSOLE_POLL_SECONDS"],
        **_temporary_context(detail),
    )


@bp.route("/proposals/<proposal_id>/cancel", methods=["POST"])
@role_required(*CHANGE_ROLES)
def cancel(proposal_id: str):
    """Cancel a scheduled proposal before it is sent (TEMP-4); an approved one takes two
    people: the first asks, a second reviewer who did not make it confirms (FOUR-9)."""
    form = EmptyForm()
    detail = _detail_or_404(proposal_id)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Reload the page and try again.")
        raise_for_json(error)
        return _render_detail(detail, error=error, status=400)
    try:
        result = cancel_scheduled(proposal_id, current_user)
    except ApiError as error:
        raise_for_json(error)
        return _render_detail(_detail_or_404(proposal_id), error=error, status=error.status)
    action = label("action", detail.proposal.action_code)
    if result.step == "ask":
        flash(
            f"You asked to cancel “{action}”. A second reviewer who did not make it must confirm; "
            "until then it is sent at its time.",
            "ok",
        )
    else:
        flash(f"You cancelled “{action}”. Nothing will be sent.", "ok")
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)


@bp.route("/proposals/<proposal_id>/temporary-change", methods=["POST"])
@role_required(*CHANGE_ROLES)
def temporary_change(proposal_id: str):
    """Propose ending a temporary action now or extending it (TEMP-3, four-eyes)."""
    form = TemporaryChangeForm()
    detail = _detail_or_404(proposal_id)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Give the extension in whole minutes (at least 1).")
        raise_for_json(error)
        return _render_detail(detail, error=error, status=400)
    minutes = form.extend_minutes.data
    try:
        result = propose_change(
            proposal_id,
            kind=form.kind.data,
            operator=current_user,
            idempotency_key=form.idempotency_key.data,
            extend_seconds=minutes * 60 if minutes else None,
        )
    except ApiError as error:
        raise_for_json(error)
        return _render_detail(_detail_or_404(proposal_id), error=error, status=error.status)
    what = "Ending it now" if form.kind.data == "end_now" else f"Extending it by {minutes} minutes"
    flash(f"{what} is proposed. Another reviewer must approve it; until then the schedule stands.", "ok")
    return redirect(url_for("console.proposal", proposal_id=result.proposal_id), code=303)


@bp.route("/proposals/<proposal_id>/decision", methods=["POST"])
@role_required("reviewer")  # and the service enforces maker/checker (APPR-4)
def decide(proposal_id: str):
    form = DecisionForm()
    detail = _detail_or_404(proposal_id)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Choose approve or reject and confirm the digest.")
        raise_for_json(error)
        return _render_detail(detail, decision_form=form, error=error, status=400)
    try:
        result = decide_proposal(
            proposal_id,
            decision=form.decision.data,
            payload_digest=form.payload_digest.data.strip(),
            reason=form.reason.data,
            idempotency_key=form.idempotency_key.data,
            operator=current_user,
        )
    except ApiError as error:
        raise_for_json(error)  # REV-5: a JSON client gets JSON, maker/checker included
        return _render_detail(_detail_or_404(proposal_id), decision_form=form, error=error, status=error.status)
    action = label("action", detail.proposal.action_code)
    if result.state == ProposalState.APPROVAL_REQUIRED:  # a vote that does not decide it yet (POL-1)
        flash(f"Your vote on “{action}” is recorded. It still waits: {result.missing}.", "ok")
    elif result.state == ProposalState.APPROVED:
        flash(f"You approved “{action}”. It is queued for delivery; this page follows it.", "follows")
    else:
        flash(f"You rejected “{action}”. Nothing will be sent.", "ok")
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)


@bp.route("/proposals/<proposal_id>/retry", methods=["POST"])
@role_required(*OPERATOR_ROLES)
def retry(proposal_id: str):
    form = RetryForm()
    detail = _detail_or_404(proposal_id)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Reload the page and try again.")
        raise_for_json(error)
        return _render_detail(detail, retry_form=form, error=error, status=400)
    try:
        result = retry_proposal(
            proposal_id,
            payload_digest=form.payload_digest.data,
            idempotency_key=form.idempotency_key.data,
            operator=current_user,
        )
    except ApiError as error:
        raise_for_json(error)
        return _render_detail(_detail_or_404(proposal_id), retry_form=form, error=error, status=error.status)
    flash(f"Retry requested: delivery cycle {result.delivery_cycle} has started.", "ok")
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)


def _submitted(proposal_id: str, form, call, done: str):
    """A page's one-button POST: the form checked, one service call, a notice and a
    redirect back; a refusal renders the page with its error (REV-5 for JSON)."""
    if not form.validate():
        failure = ApiError(400, "form_invalid", "Reload the page and try again.")
    else:
        try:
            call(form)
            flash(done, "follows")
            return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)
        except ApiError as error:
            failure = error
    raise_for_json(failure)
    return _render_detail(_detail_or_404(proposal_id), error=failure, status=failure.status)


@bp.route("/proposals/<proposal_id>/retry-now", methods=["POST"])
@role_required(*OPERATOR_ROLES)
def retry_now_view(proposal_id: str):
    """Start the next attempt of a delivery that will be retried, at once (QUEUE-6)."""
    _detail_or_404(proposal_id)
    return _submitted(
        proposal_id,
        RetryNowForm(),
        lambda form: retry_now(proposal_id, idempotency_key=form.idempotency_key.data, operator=current_user),
        "The next attempt starts now; this page follows it.",
    )


@bp.route("/proposals/<proposal_id>/compensate", methods=["POST"])
@role_required(*OPERATOR_ROLES)
def compensate(proposal_id: str):
    """Propose a compensating action for an applied one (COMP-1..3)."""
    detail = _detail_or_404(proposal_id)
    form = _compensation_form(detail, formdata=request.form)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Choose a component and give an action code, target and payload.")
        raise_for_json(error)
        return _render_detail(detail, compensation_form=form, error=error, status=400)
    try:
        result = propose_compensation(
            proposal_id,
            component_version_id=form.component_version_id.data,
            action_code=form.action_code.data.strip(),
            target=_json_field(form.target.data, "action_target_invalid", "target"),
            payload=_json_field(form.payload.data, "action_payload_invalid", "payload"),
            idempotency_key=form.idempotency_key.data,
            operator=current_user,
        )
    except ApiError as error:
        raise_for_json(error)
        return _render_detail(_detail_or_404(proposal_id), compensation_form=form, error=error, status=error.status)
    flash("Compensation proposed. Another reviewer must approve it before it is sent.", "ok")
    return redirect(url_for("console.proposal", proposal_id=result.proposal_id), code=303)


def _json_field(text: str, code: str, field: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    try:
        return json.loads(text, parse_constant=refuse)
    except (ValueError, RecursionError) as error:
        raise ApiError(400, code, f"The {field} is not valid JSON: {str(error)[:200]}", field) from error


@bp.get("/proposals/<proposal_id>/decision")
@bp.get("/proposals/<proposal_id>/retry")
@bp.get("/proposals/<proposal_id>/compensate")
@bp.get("/proposals/<proposal_id>/cancel")
@bp.get("/proposals/<proposal_id>/temporary-change")
@role_required(*VIEW_ROLES)
def proposal_form_reloaded(proposal_id: str):
    """A reload of a refused form's page shows the proposal, not 405."""
    _detail_or_404(proposal_id)
    return redirect(url_for("console.proposal", proposal_id=proposal_id), code=303)
