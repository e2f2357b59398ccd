"""Admin: operators (users of the console), their roles and whether they may sign in."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user, login_user

from app.domain.errors import ApiError
from app.domain.approval_settings import attributes_text
from app.services.admin import invitations, mfa, operator_teams
from app.services.admin import operators as service
from app.services.admin.changes import PendingChange

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, raise_if_not_found, refused
from .forms import ActionForm, AttributesForm, RolesForm, UserForm


def _list_page(form=None, error=None, status=200):
    rows = service.list_operators(current_user.installation_id)
    invited = invitations.invited_operator_ids(current_user.installation_id)
    form = form or UserForm(formdata=None)
    return render_template("admin/users.html", rows=rows, invited=invited, form=form, error=error), status


def _detail_page(operator_id: str, form=None, error=None, status=200, attributes_form=None):
    operator = service.operator_detail(current_user.installation_id, operator_id)
    form = form or RolesForm(formdata=None, roles=sorted(operator.roles))
    attributes_form = attributes_form or AttributesForm(
        formdata=None, team=operator.team or "", attributes=attributes_text(operator.attributes)
    )
    return render_template(
        "admin/user.html",
        u=operator,
        form=form,
        attributes_form=attributes_form,
        action_form=ActionForm(),
        invitation=invitations.invitation_status(operator.id),
        mail_configured=invitations.mail_configured(),
        error=error,
    ), status


@bp.route("/users")
@role_required(*VIEW_ROLES)
def users():
    return _list_page()


@bp.route("/users", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_create():
    form = UserForm()
    if not form.validate():
        return _list_page(form, form_invalid(), 400)
    try:
        pending = service.add_operator(
            current_user, email=form.email.data, display_name=form.display_name.data, roles=form.roles.data or []
        )
    except ApiError as error:
        return _list_page(refused(form, error), error, error.status)
    return answer_pending(pending)  # every account waits for a second admin (FOUR-6)


@bp.route("/users/<operator_id>")
@role_required(*VIEW_ROLES)
def user(operator_id: str):
    return _detail_page(operator_id)


def _keep_own_session(operator) -> None:
    """A change to one's own account bumps its session version; sign in again with
    the new one so the admin is not logged out by their own change."""
    if operator.id == current_user.id:
        login_user(operator)


@bp.route("/users/<operator_id>/roles", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_roles(operator_id: str):
    form = RolesForm()
    if not form.validate():
        return _detail_page(operator_id, form, form_invalid(), 400)
    try:
        operator = service.change_operator_roles(current_user, operator_id, form.roles.data or [])
    except ApiError as error:
        return _detail_page(operator_id, refused(form, error), error, error.status)
    if isinstance(operator, PendingChange):
        return answer_pending(operator)
    _keep_own_session(operator)
    return redirect(url_for("admin.user", operator_id=operator_id), code=303)


def _set_active(operator_id: str, active: bool):
    if not ActionForm().validate():
        return _detail_page(operator_id, error=form_invalid(), status=400)
    try:
        outcome = service.set_operator_active(current_user, operator_id, active)
    except ApiError as error:
        raise_if_not_found(error)
        return _detail_page(operator_id, error=error, status=error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.user", operator_id=operator_id), code=303)


@bp.route("/users/<operator_id>/deactivate", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_deactivate(operator_id: str):
    return _set_active(operator_id, False)


@bp.route("/users/<operator_id>/reactivate", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_reactivate(operator_id: str):
    return _set_active(operator_id, True)


@bp.route("/users/<operator_id>/second-factor/reset", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_second_factor_reset(operator_id: str):
    """Propose resetting a user's second factor (OPS-2): a change for a second admin (FOUR-2)."""
    if not ActionForm().validate():
        return _detail_page(operator_id, error=form_invalid(), status=400)
    try:
        outcome = mfa.reset_second_factor(current_user, operator_id)
    except ApiError as error:
        raise_if_not_found(error)
        return _detail_page(operator_id, error=error, status=error.status)
    return answer_pending(outcome)


@bp.route("/users/<operator_id>/invitation", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_invitation(operator_id: str):
    """Re-send an invited user's invitation (FOUR-6): mailed at once, or a change for a second admin."""
    if not ActionForm().validate():
        return _detail_page(operator_id, error=form_invalid(), status=400)
    try:
        outcome = invitations.resend_invitation(current_user, operator_id)
    except ApiError as error:
        raise_if_not_found(error)
        return _detail_page(operator_id, error=error, status=error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    if "invitation_sent_to" in outcome:
        flash(f"A new invitation was mailed to {outcome['invitation_sent_to']}; the old link no longer works.", "ok")
    else:
        flash(outcome.get("invitation_mail_failed", "The invitation could not be mailed."), "error")
    return redirect(url_for("admin.user", operator_id=operator_id), code=303)


@bp.route("/users/<operator_id>/attributes", methods=["POST"])
@role_required(*EDIT_ROLES)
def user_attributes(operator_id: str):
    """Propose a user's team and attributes (POL-1): a change for a second admin (FOUR-2)."""
    form = AttributesForm()
    if not form.validate():
        return _detail_page(operator_id, error=form_invalid(), status=400, attributes_form=form)
    try:
        outcome = operator_teams.propose_operator_attributes(
            current_user, operator_id, team=form.team.data, attributes=form.attributes.data
        )
    except ApiError as error:
        return _detail_page(operator_id, error=error, status=error.status, attributes_form=refused(form, error))
    if outcome is None:
        flash("Nothing to change: the team and attributes are those already.", "ok")
        return redirect(url_for("admin.user", operator_id=operator_id), code=303)
    return answer_pending(outcome)
