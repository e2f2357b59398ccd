"""Admin: the words shown for codes (SPEC REV-3)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import SelectField, StringField
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.domain.labels import KINDS
from app.services.admin import label_settings as service
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused


class LabelForm(ConsoleForm):
    kind = SelectField("Kind", choices=[SelectChoice(k, name) for k, name in KINDS.items()], validate_choice=False)
    code = StringField("Code")
    label = StringField("Label (empty: back to the default)")


def _page(form=None, error=None, status=200):
    return render_template(
        "admin/labels.html",
        table=service.label_table(current_user.installation_id),
        kinds=KINDS,
        form=form or LabelForm(formdata=None),
        error=error,
    ), status


@bp.route("/labels")
@role_required(*VIEW_ROLES)
def labels():
    return _page()


@bp.route("/labels", methods=["POST"])
@role_required(*EDIT_ROLES)
def label_set():
    form = LabelForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(form, error, 400)
    try:
        pending = service.set_label(
            current_user, kind=form.kind.data or "", code=(form.code.data or "").strip(), label=form.label.data
        )
    except ApiError as error:
        raise_for_json(error)
        return _page(refused(form, error), error, error.status)
    if pending is None:
        flash(f"Nothing to change: {form.code.data.strip()} reads that already.", "ok")
        return redirect(url_for("admin.labels"), code=303)
    flash("Label change stored: it applies when a second admin approves it (FOUR-4).", "ok")
    return answer_pending(pending)
