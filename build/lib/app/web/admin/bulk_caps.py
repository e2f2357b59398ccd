"""Admin: items per bulk batch, per role (SPEC BULK-5), proposed for a second admin."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import SelectField, StringField
from wtforms.fields.choices import SelectChoice

from app.domain.bulk.batch import DEFAULT_CAP
from app.domain.errors import ApiError
from app.models.tenancy import ROLES
from app.services.admin import bulk_caps as service
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused


class CapForm(ConsoleForm):
    role = SelectField("Role", choices=[SelectChoice(role) for role in ROLES], validate_choice=False)
    max_items = StringField("Items per batch")


def _page(form=None, error=None, status=200):
    return render_template(
        "admin/bulk_caps.html",
        caps=service.cap_table(current_user.installation_id),
        default_cap=DEFAULT_CAP,
        max_cap=service.MAX_CAP,
        form=form or CapForm(formdata=None),
        error=error,
    ), status


@bp.route("/bulk-caps")
@role_required(*VIEW_ROLES)
def bulk_caps():
    return _page()


@bp.route("/bulk-caps", methods=["POST"])
@role_required(*EDIT_ROLES)
def bulk_cap_set():
    """Propose a role's cap (BULK-5): stored for a second admin, never applied here."""
    form = CapForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(form, error, 400)
    try:
        pending = service.propose_cap(current_user, role=form.role.data or "", max_items=form.max_items.data or "")
    except ApiError as error:
        raise_for_json(error)
        return _page(refused(form, error), error, error.status)
    if pending is None:
        flash(f"Nothing to change: the cap for {form.role.data} is that already.", "ok")
        return redirect(url_for("admin.bulk_caps"), code=303)
    flash("Bulk cap change stored: it applies when a second admin approves it (BULK-5, FOUR-2).", "ok")
    return answer_pending(pending)
