"""Admin: erasure of a subject's personal data and the retention period (SPEC OPS-4).
Every write here is a request for a second admin or that admin's decision (declared in
`app.domain.config_changes.SINGLE_ADMIN_WRITES`)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import StringField, TextAreaField

from app.domain.errors import ApiError
from app.services.admin import erasure_requests as service
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .common import EDIT_ROLES, VIEW_ROLES


class ErasureForm(ConsoleForm):
    subject = StringField("Subject reference")
    reason = TextAreaField("Reason")


class RetentionForm(ConsoleForm):
    days = StringField("Days")
    reason = TextAreaField("Reason")


class DecideForm(ConsoleForm):
    pass


def _page(error=None, status=200):
    return render_template("admin/erasure.html", page=service.erasure_page(current_user.installation_id),
                           form=ErasureForm(formdata=None), decide=DecideForm(formdata=None), error=error), status


def _form_expired() -> ApiError:
    return ApiError(400, "form_invalid", "The form expired; reload the page and try again.")


def _run(action, done: str):
    """Run a service call for a form post: its refusal on the page, else back to the list."""
    try:
        action()
    except ApiError as error:
        raise_for_json(error)
        return _page(error, error.status)
    flash(done, "ok")
    return redirect(url_for("admin.erasure"), code=303)


@bp.route("/erasure")
@role_required(*VIEW_ROLES)
def erasure():
    return _page()


@bp.route("/erasure", methods=["POST"])
@role_required(*EDIT_ROLES)
def erasure_request():
    """Ask a second admin to erase a subject's personal data."""
    form = ErasureForm()

    def action():
        if not form.validate():
            raise _form_expired()
        service.request_erasure(current_user, form.subject.data, form.reason.data)

    return _run(action, "Erasure requested: another admin must approve it before anything is erased.")


@bp.route("/erasure-retention", methods=["POST"])
@role_required(*EDIT_ROLES)
def retention_request():
    """Ask a second admin to set the retention period (shortening it erases data)."""
    form = RetentionForm()

    def action():
        if not form.validate():
            raise _form_expired()
        service.request_retention(current_user, form.days.data, form.reason.data)

    return _run(action, "Retention period requested: another admin must approve it.")


@bp.route("/erasure/<erasure_id>/approve", methods=["POST"])
@role_required(*EDIT_ROLES)
def erasure_approve(erasure_id: str):
    def action():
        if not DecideForm().validate():
            raise _form_expired()
        service.approve(current_user, erasure_id)

    return _run(action, "Approved and applied.")


@bp.route("/erasure/<erasure_id>/reject", methods=["POST"])
@role_required(*EDIT_ROLES)
def erasure_reject(erasure_id: str):
    def action():
        if not DecideForm().validate():
            raise _form_expired()
        service.reject(current_user, erasure_id)

    return _run(action, "Rejected: nothing was erased or changed.")
