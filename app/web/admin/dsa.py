"""Admin: the installation's DSA settings (SPEC §7 DSA-1): the settings in force in
words, the changes of them waiting, and a form whose proposal waits for a second
admin (FOUR-2)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user

from app.domain.dsa_settings import settings_from_json
from app.domain.dsa_words import allowed_values, settings_words
from app.domain.errors import ApiError
from app.services.admin import dsa_config as service
from app.web.errors import raise_for_json

from ..decorators import role_required
from ..formatting import pretty_json
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import DsaSettingsForm


def _page(form=None, error=None, status=200):
    installation_id = current_user.installation_id
    document, version = service.settings_in_force(installation_id)
    if form is None:
        form = DsaSettingsForm(formdata=None)
        form.settings.data = pretty_json(document)
    return render_template(
        "admin/dsa.html",
        words=settings_words(settings_from_json(document), service.connection_names(installation_id)),
        version=version,
        pending=service.pending_settings_changes(installation_id),
        allowed=allowed_values(),
        form=form,
        error=error,
    ), status


@bp.route("/dsa")
@role_required(*VIEW_ROLES)
def dsa():
    return _page()


@bp.route("/dsa", methods=["POST"])
@role_required(*EDIT_ROLES)
def dsa_settings_set():
    """Propose the whole DSA settings document (DSA-1): stored for a second admin, never applied here."""
    form = DsaSettingsForm()
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
        flash("Nothing to change: the DSA settings are those already.", "ok")
        return redirect(url_for("admin.dsa"), code=303)
    flash("DSA settings stored: they apply when a second admin approves them (DSA-1, FOUR-2).", "ok")
    return answer_pending(pending)
