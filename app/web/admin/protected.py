"""Admin: protected subjects (SPEC POL-4): the accounts and authors protected now, the
marking and unmarking changes waiting, and the forms whose proposals wait for a second
admin (FOUR-2)."""

from __future__ import annotations

from flask import render_template
from flask_login import current_user
from wtforms import SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Length

from app.domain.errors import ApiError
from app.domain.protected import KINDS
from app.services.admin import protected_subjects as service
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused


class MarkForm(ConsoleForm):
    kind = SelectField("What to protect", choices=[SelectChoice(kind, words) for kind, words in KINDS.items()],
                       validate_choice=False)
    reference = StringField("Subject reference", validators=[Length(max=600)])
    reason = TextAreaField("Reason", validators=[Length(max=4000)])


class UnmarkForm(ConsoleForm):
    reason = TextAreaField("Reason for unprotecting", validators=[Length(max=4000)])


def _page(form=None, error=None, status=200, unmark_form=None, unmark_id=None):
    installation_id = current_user.installation_id
    return render_template(
        "admin/protected.html",
        rows=service.protected_subjects(installation_id),
        pending=service.pending_protection_changes(installation_id),
        form=form or MarkForm(formdata=None),
        unmark_form=unmark_form or UnmarkForm(formdata=None),
        unmark_id=unmark_id,
        error=error,
    ), status


@bp.route("/protected")
@role_required(*VIEW_ROLES)
def protected():
    return _page()


@bp.route("/protected", methods=["POST"])
@role_required(*EDIT_ROLES)
def protected_mark():
    """Propose marking an account or an author protected (POL-4): stored for a second admin."""
    form = MarkForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(form, error, 400)
    try:
        pending = service.propose_mark(current_user, form.kind.data, form.reference.data or "", form.reason.data or "")
    except ApiError as error:
        raise_for_json(error)
        return _page(refused(form, error), error, error.status)
    return answer_pending(pending)


@bp.route("/protected/<protected_id>/unmark", methods=["POST"])
@role_required(*EDIT_ROLES)
def protected_unmark(protected_id: str):
    """Propose unmarking a protected subject (POL-4): stored for a second admin."""
    form = UnmarkForm()
    if not form.validate():
        error = form_invalid()
        raise_for_json(error)
        return _page(error=error, status=400, unmark_form=form, unmark_id=protected_id)
    try:
        pending = service.propose_unmark(current_user, protected_id, form.reason.data or "")
    except ApiError as error:
        raise_for_json(error)
        return _page(error=error, status=error.status, unmark_form=refused(form, error), unmark_id=protected_id)
    return answer_pending(pending)
