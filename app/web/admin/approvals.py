"""Admin: approval policies and routes (SPEC POL-1, POL-3): the settings in force in
words, the changes of them waiting, and a form whose proposal waits for a second
admin (FOUR-2)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user

from app.domain.approval_policy import settings_from_json
from app.domain.approval_settings import settings_words
from app.domain.errors import ApiError
from app.services.admin import approval_policies as service
from app.web.errors import raise_for_json

from ..decorators import role_required
from ..formatting import pretty_json
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ApprovalSettingsForm


def _page(form=None, error=None, status=200):
    installation_id = current_user.installation_id
    document, version = service.settings_in_force(installation_id)
    if form is None:
        form = ApprovalSettingsForm(formdata=None)
        form.settings.data = pretty_json(document)
    return render_template(
        "admin/approvals.html",
        words=settings_words(settings_from_json(document)),
        version=version,
        pending=service.pending_settings_changes(installation_id),
        form=form,
        error=error,
    ), status


@bp.route("/approvals")
@role_required(*VIEW_ROLES)
def approvals():
    return _page()


@bp.route("/approvals", methods=["POST"])
@role_required(*EDIT_ROLES)
def approval_settings_set():
    """Propose the whole settings document (POL-3): stored for a second admin, never applied here."""
    form = ApprovalSettingsForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(form, error, 400)
    try:
        pending = service.propose_settings(current_user, service.parse_document(form.settings.data))
    except ApiError as error:
        raise_for_json(error)
        return _page(refused(form, error), error, error.status)
    if pending is None:
        flash("Nothing to change: the approval settings are those already.", "ok")
        return redirect(url_for("admin.approvals"), code=303)
    flash("Approval settings stored: they apply when a second admin approves them (POL-3, FOUR-2).", "ok")
    return answer_pending(pending)
