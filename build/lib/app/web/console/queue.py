"""The moderator's queue (SPEC QUEUE): subjects to work through, filtered and paged;
a subject's page with its reports; claiming, releasing and deciding a subject."""

from __future__ import annotations

from dataclasses import replace

from flask import abort, flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.domain.clock import clock_utc
from app.domain.errors import ApiError
from app.domain.queue import QueueFilter, parse_filter
from app.services.cases.queue_subjects import claim_subject, release_subject
from app.services.cases.reports import decide_subject
from app.services.read.queue_pages import QueuePage, queue_choices, queue_page
from app.services.read.queue_subject import subject_page, subject_row
from app.web.errors import raise_for_json
from app.web.labels import code_of, label

from ..decorators import is_htmx, role_required
from .blueprint import bp
from .forms import EmptyForm
from .reports import decision_form, enforcement_words

QUEUE_ROLES = ("moderator", "reviewer", "admin", "auditor")


def subject_words(row) -> str:
    """A subject named by what it is, as plain text: "Account user:5120 (goalline_greg)"."""
    name = f"{label('subject_kind', row.kind)} {row.reference}"
    return f"{name} ({row.author_name})" if row.author_name else name


@bp.route("/queue")
@role_required(*QUEUE_ROLES)
def queue():
    error = None
    try:
        wanted = parse_filter(request.args)
        wanted = replace(wanted, reason=code_of("report_reason", wanted.reason),
                         category=code_of("report_category", wanted.category))  # a label typed in a URL
        page = queue_page(current_user, wanted, request.args.get("cursor"))
    except ApiError as refused:  # a filter or page link in words, with the form to correct it
        raise_for_json(refused)
        error, wanted, page = refused, QueueFilter(), QueuePage([], None, 0, queue_choices(current_user))
    return render_template("queue/list.html", page=page, wanted=wanted, args=request.args, error=error,
                           claim_form=EmptyForm(formdata=None)), (error.status if error else 200)


def _back(subject_id: str) -> str:
    """Where a plain (no-JS) claim or release returns: the page it came from, if ours
    (a /queue path without control characters or backslashes), else the subject's page."""
    target = request.form.get("next", "")
    if target.startswith("/queue") and target.isprintable() and "\\" not in target:  # no CR/LF, no "\\" host
        return target
    return url_for("console.queue_subject", subject_id=subject_id)


def _claim_answer(subject_id: str, change):
    """Run a claim or release; htmx gets the row back with a status line, a form a
    redirect with a notice. `change` returns the notice with ``{subject}`` to fill in."""
    form = EmptyForm()
    try:
        if not form.validate():
            raise ApiError(400, "csrf_invalid", "The form expired; reload the page and try again.")
        template = change()
    except ApiError as error:
        raise_for_json(error)
        if error.status == 404:  # not this installation's subject: as for any other page
            raise
        if is_htmx():
            return render_template("errors/_fragment.html", error=error), error.status
        flash(error.message, "error")
        return redirect(_back(subject_id), code=303)
    row = subject_row(current_user, subject_id)
    message = template.format(subject=subject_words(row))
    if is_htmx():  # the row, and what happened in the page's aria-live area (QUEUE-6)
        return render_template("queue/_claimed.html", r=row, claim_form=EmptyForm(formdata=None),
                               back=request.form.get("next", ""), message=message)
    flash(message, "ok")
    return redirect(_back(subject_id), code=303)


@bp.post("/queue/<subject_id>/claim")
@role_required("moderator")
def queue_claim(subject_id: str):
    """Claim a subject (QUEUE-2)."""
    def change():
        until = claim_subject(current_user, subject_id)
        return f"Claimed until {clock_utc(until)}: {{subject}}."
    return _claim_answer(subject_id, change)


@bp.post("/queue/<subject_id>/release")
@role_required("moderator")
def queue_release(subject_id: str):
    """Give a claimed subject back (QUEUE-2)."""
    def change():
        release_subject(current_user, subject_id)
        return "Released {subject}; others can claim it."
    return _claim_answer(subject_id, change)


def _render_subject(subject_id: str, form=None, error=None, status=200):
    page = subject_page(current_user, subject_id)
    if page is None:
        abort(404)
    return render_template("queue/detail.html", s=page, form=form or decision_form(formdata=None),
                           claim_form=EmptyForm(formdata=None), error=error), status


@bp.get("/queue/<subject_id>")
@role_required(*QUEUE_ROLES)
def queue_subject(subject_id: str):
    return _render_subject(subject_id)


@bp.post("/queue/<subject_id>/decision")
@role_required("moderator")
def queue_decide(subject_id: str):
    """Decide every open report about the subject at once (QUEUE-3)."""
    form = decision_form()
    if not form.validate():
        error = ApiError(400, "form_invalid", "Choose a decision.", "decision_code")
        raise_for_json(error)
        return _render_subject(subject_id, form, error, 400)
    row = subject_row(current_user, subject_id)
    if row is None:
        abort(404)
    try:
        result = decide_subject(subject_id, decision_code=form.decision_code.data, rationale=form.rationale.data or "",
                                operator=current_user, idempotency_key=form.idempotency_key.data or None)
    except ApiError as error:
        raise_for_json(error)
        return _render_subject(subject_id, form, error, error.status)
    count = len(result.report_ids)
    flash(f"Decided {count} report{'s' if count != 1 else ''} about {subject_words(row)}: "
          f"{label('decision', form.decision_code.data)}. {enforcement_words(result)}", "ok")
    return redirect(url_for("console.queue"), code=303)


@bp.get("/queue/<subject_id>/claim")
@bp.get("/queue/<subject_id>/release")
@bp.get("/queue/<subject_id>/decision")
@role_required(*QUEUE_ROLES)
def queue_form_reloaded(subject_id: str):
    """A reload of a form's address shows the subject, not 405."""
    if subject_row(current_user, subject_id) is None:
        abort(404)
    return redirect(url_for("console.queue_subject", subject_id=subject_id), code=303)
