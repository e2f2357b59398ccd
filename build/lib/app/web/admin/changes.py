"""Admin: configuration changes waiting for a second admin (SPEC FOUR-2), their
history, and approving (bound to the digest) or rejecting one."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user

from app.domain.errors import ApiError
from app.services.admin import reviews as service
from app.services.admin.changes import PendingChange

from ..decorators import role_required
from .blueprint import bp
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ChangeApproveForm, ChangeRejectForm


def _detail_page(change_id: str, approve_form=None, reject_form=None, error=None, shown_once=None, status=200):
    detail = service.change_detail(current_user, change_id)
    return render_template(
        "admin/change.html",
        d=detail,
        approve_form=approve_form or ChangeApproveForm(formdata=None),
        reject_form=reject_form or ChangeRejectForm(formdata=None),
        error=error,
        shown_once=shown_once,
    ), status


def answer_pending(pending: PendingChange):
    """The answer to a form whose change was stored for a second admin: its page
    (201 with a secret generated for it, shown this once), else a redirect there."""
    if pending.shown_once:
        return _detail_page(pending.change_id, shown_once=pending.shown_once, status=201)
    return redirect(url_for("admin.change", change_id=pending.change_id), code=303)


@bp.route("/changes")
@role_required(*VIEW_ROLES)
def changes():
    pending, decided = service.list_changes(current_user.installation_id)
    return render_template("admin/changes.html", pending=pending, decided=decided)


@bp.route("/changes/<change_id>")
@role_required(*VIEW_ROLES)
def change(change_id: str):
    return _detail_page(change_id)


@bp.route("/changes/<change_id>/approve", methods=["POST"])
@role_required(*EDIT_ROLES)
def change_approve(change_id: str):
    service.change_detail(current_user, change_id)  # another installation's id: 404 before anything
    form = ChangeApproveForm()
    if not form.validate():
        return _detail_page(change_id, approve_form=form, error=form_invalid(), status=400)
    try:
        result = service.approve_change(current_user, change_id, form.digest.data)
    except ApiError as error:
        return _detail_page(change_id, approve_form=refused(form, error), error=error, status=error.status)
    if "invitation_link" in result:  # mail not configured: the approving admin passes the link on (FOUR-6)
        return _detail_page(change_id, shown_once={"invitation_link": result["invitation_link"]})
    flash("Change approved and applied.", "ok")
    if "invitation_sent_to" in result:
        flash(f"The invitation was mailed to {result['invitation_sent_to']}.", "ok")
    if "invitation_mail_failed" in result:
        flash(f"{result['invitation_mail_failed']} From the user's page.", "error")
    return redirect(url_for("admin.change", change_id=change_id), code=303)


@bp.route("/changes/<change_id>/reject", methods=["POST"])
@role_required(*EDIT_ROLES)
def change_reject(change_id: str):
    service.change_detail(current_user, change_id)
    form = ChangeRejectForm()
    if not form.validate():
        return _detail_page(change_id, reject_form=form, error=form_invalid(), status=400)
    try:
        service.reject_change(current_user, change_id, form.reason.data)
    except ApiError as error:
        return _detail_page(change_id, reject_form=refused(form, error), error=error, status=error.status)
    return redirect(url_for("admin.change", change_id=change_id), code=303)
