"""A report opened in the console for a subject nobody reported (issue 25, QUEUE-1)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import SelectField, StringField, TextAreaField
from wtforms.validators import Length, Optional

from app.domain.errors import ApiError
from app.services.cases.proactive import integration_choices, open_report
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp

KINDS = [("post", "Post"), ("user", "Account"), ("comment", "Comment"), ("record", "Record"),
         ("content", "Other content")]


class OpenReportForm(ConsoleForm):
    reference = StringField("Subject reference", validators=[Length(max=500)],
                            description="e.g. post:1003, user:5120 or an at:// address")
    kind = SelectField("Kind", choices=KINDS, default="post")
    category = StringField("Category", validators=[Optional(), Length(max=100)])
    reason = StringField("Reason", validators=[Optional(), Length(max=100)], description="e.g. spam, harassment")
    summary = TextAreaField("Why you open it", validators=[Length(max=5000)])
    integration_id = SelectField("Platform", choices=[], validators=[Optional()])


def _form(**kwargs) -> OpenReportForm:
    form = OpenReportForm(**kwargs)
    form.integration_id.choices = integration_choices(current_user)
    return form


@bp.route("/reports/new", methods=["GET", "POST"])
@role_required("moderator")
def report_open():
    """The form; on POST, one report with no platform report behind it (opened_by)."""
    form = _form()
    error = None
    if form.is_submitted():
        try:
            if not form.validate():
                raise ApiError(400, "form_invalid", "Correct the marked fields.")
            report = open_report(current_user, reference=form.reference.data, kind=form.kind.data,
                                 category=form.category.data, reason=form.reason.data, summary=form.summary.data,
                                 integration_id=form.integration_id.data or None)
        except ApiError as refused:
            raise_for_json(refused)
            error = refused
        else:
            flash(f"Report {report.public_reference} opened about {form.reference.data.strip()}; "
                  "it waits in the queue.", "ok")
            return redirect(url_for("console.report", report_id=report.id), code=303)
    return render_template("reports/new.html", form=form, error=error), (error.status if error else 200)
