"""Admin: single sign-on (SPEC OPS-1): the provider the console is configured for, the
group→role mapping in force and the changes of it waiting, and a form whose proposal
waits for a second admin (FOUR-2)."""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import TextAreaField
from wtforms.validators import Length

from app.domain.errors import ApiError
from app.domain.sso import mapping_text
from app.services.admin import sso_mapping as service
from app.web.auth.sso import callback_url, sso_enabled
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused


class MappingForm(ConsoleForm):
    mapping = TextAreaField("Group = role, one pair per line", validators=[Length(max=50_000)])


def _page(form=None, error=None, status=200):
    installation_id = current_user.installation_id
    mapping = service.current_mapping(installation_id)
    if form is None:
        form = MappingForm(formdata=None)
        form.mapping.data = mapping_text(mapping)
    return render_template(
        "admin/sso.html",
        enabled=sso_enabled(),
        issuer=current_app.config.get("OIDC_ISSUER"),
        groups_claim=current_app.config.get("OIDC_GROUPS_CLAIM"),
        redirect_uri=callback_url(),
        mapping=mapping,
        pending=service.pending_mapping_changes(installation_id),
        form=form,
        error=error,
    ), status


@bp.route("/sso")
@role_required(*VIEW_ROLES)
def sso():
    return _page()


@bp.route("/sso", methods=["POST"])
@role_required(*EDIT_ROLES)
def sso_mapping_set():
    """Propose the whole mapping (OPS-1): stored for a second admin, never applied here."""
    form = MappingForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(form, error, 400)
    try:
        pending = service.propose_mapping(current_user, form.mapping.data or "")
    except ApiError as error:
        raise_for_json(error)
        return _page(refused(form, error), error, error.status)
    if pending is None:
        flash("Nothing to change: the mapping is that already.", "ok")
        return redirect(url_for("admin.sso"), code=303)
    flash("Mapping change stored: it applies when a second admin approves it (OPS-1, FOUR-2).", "ok")
    return answer_pending(pending)
