"""The bulk pages (SPEC BULK-1..8): the list, a new bulk action (selection, action,
reason → dry run), and one batch through its life: dry run, submitted, running with
its live ledger, finished. Views are thin: parse the form, call one service, redirect
(303) or render; refusals show their code."""

from __future__ import annotations

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.domain.errors import ApiError
from app.extensions import db
from app.services.bulk.actions import bulk_actions
from app.services.bulk.dry_runs import SelectionRefused, start_dry_run
from app.services.read import bulk_batches as reads
from app.web.errors import raise_for_json
from app.web.labels import label

from ..decorators import role_required
from .blueprint import bp
from .bulk_forms import BulkNewForm, ControlForm, DigestForm, ReasonForm, RejectForm

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")
CONTROL_ROLES = reads.CONTROL_ROLES


def _detail(batch_id: str, *, with_drift: bool = True) -> reads.BatchDetail:
    detail = reads.batch_detail(current_user, batch_id, after=request.args.get("after"),
                                drift_limit=current_app.config["BULK_DRIFT_SHARE"], with_drift=with_drift)
    if detail is None:
        abort(404)
    return detail


@bp.route("/bulk")
@role_required(*VIEW_ROLES)
def bulk_list():
    page = reads.list_batches(current_user, request.args.get("after"))
    next_url = url_for("console.bulk_list", after=page.next_cursor) if page.next_cursor else None
    return render_template("bulk/list.html", page=page, next_url=next_url)


def _action_words(action) -> str:
    """What the operator reads for a choice (REV-3): the decision's and the action's
    labels and the workflow's name, e.g. "Remove content → Take down (Enforcement)"."""
    words = f"{label('decision', action.decision_code)} → {label('action', action.action_code)}"
    return f"{words} ({action.workflow_name})" if action.workflow_name else words


def _new_form(formdata=None) -> BulkNewForm:
    form = BulkNewForm(formdata=formdata)
    form.action.choices = [(f"{a.key}|{a.decision_code}", _action_words(a))
                           for a in bulk_actions(db.session, current_user.installation_id)]
    return form


def _render_new(form, error=None, lines=(), status=200):
    """The form again with the refused lines (BULK-1) or the error beside its field."""
    name = getattr(error, "field", None)
    name = {"text": "subjects", "author_reference": "author" if form.source.data == "author" else name}.get(name, name)
    target = form._fields.get(name) if name and not lines else None
    if target is not None:
        target.errors = [*target.errors, f"{error.code}: {error.message}"]
    return render_template("bulk/new.html", form=form, error=error, lines=lines), status


@bp.route("/bulk/new", methods=["GET", "POST"])
@role_required("moderator")
def bulk_new():
    """Start a bulk action: a dry run of the selection (BULK-1, BULK-2); bad lines are
    answered one by one and nothing is stored."""
    if request.method == "GET":
        return _render_new(_new_form())
    form = _new_form(request.form)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Check the marked fields and try again.")
        raise_for_json(error)
        return _render_new(form, error=error, status=400)
    key, code = form.action_choice()
    try:
        batch_id = start_dry_run(current_user, selection=form.selection(request.files.get("file")),
                                 action_key=key, decision_code=code, reason=form.reason.data)
    except SelectionRefused as error:
        raise_for_json(error)
        return _render_new(form, error=error, lines=error.lines, status=error.status)
    except ApiError as error:
        raise_for_json(error)
        return _render_new(form, error=error, status=error.status)
    flash("Dry run ready: nothing was sent. Check the counts and samples, then submit it for approval.", "ok")
    return redirect(url_for("console.bulk_batch", batch_id=batch_id), code=303)


def _render_batch(detail: reads.BatchDetail, status: int = 200):
    return render_template("bulk/detail.html", d=detail,
                           poll_seconds=current_app.config["CONSOLE_POLL_SECONDS"]), status


@bp.route("/bulk/<batch_id>")
@role_required(*VIEW_ROLES)
def bulk_batch(batch_id: str):
    return _render_batch(_detail(batch_id))


@bp.route("/bulk/<batch_id>/live")
@role_required(*VIEW_ROLES)
def bulk_live(batch_id: str):
    """The batch's ledger, controls and items; polls itself while the batch runs or is
    paused and stops (no hx-trigger) once it is finished (BULK-6)."""
    detail = _detail(batch_id, with_drift=False)
    return render_template("bulk/_live.html", d=detail, poll_seconds=current_app.config["CONSOLE_POLL_SECONDS"])


def _refused(batch_id: str, error: ApiError):
    """A refused step: the code and message as a notice on the batch's page, with the
    refusal's status (a browser sees the page; a JSON client the error)."""
    raise_for_json(error)
    flash(f"{error.code}: {error.message}", "error")
    return _render_batch(_detail(batch_id), status=error.status)


def _check_control(batch_id: str, form) -> None:
    """An unknown batch is 404 whichever step is asked; a form without its fields is
    400; a pause, resume, cancel or undo names the batch digest the operator saw
    (409 when the batch is not that one)."""
    found, digest = reads.batch_digest_of(current_user, batch_id)
    if not found:
        abort(404)
    if not form.validate():
        message = "Give a reason (3 to 5,000 characters)." if "reason" in form.errors else "Reload the page and try again."
        raise _Refusal(ApiError(400, "form_invalid", message, "reason" if "reason" in form.errors else None))
    if isinstance(form, ControlForm) and form.digest.data != digest:
        raise _Refusal(ApiError(409, "bulk_batch_digest_mismatch", "This is not the batch you saw; reload it."))


class _Refusal(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.code)
        self.error = error


def _step(batch_id: str, form, call, done: str):
    """Run one service call for a POST step; 303 back to the batch on success, with
    `done` flashed (text, or a function of the call's result). An unknown batch is
    404 whichever step is asked."""
    try:
        _check_control(batch_id, form)
        result = call(form)
    except _Refusal as refusal:
        return _refused(batch_id, refusal.error)
    except ApiError as error:
        return _refused(batch_id, error)
    flash(done(result) if callable(done) else done, "ok")
    return redirect(url_for("console.bulk_batch", batch_id=batch_id), code=303)


@bp.route("/bulk/<batch_id>/submit", methods=["POST"])
@role_required("moderator")
def bulk_submit(batch_id: str):
    """Submit the dry run the maker saw, by its digest (BULK-3)."""
    from app.services.bulk.submission import submit_batch

    return _step(batch_id, DigestForm(), lambda f: submit_batch(current_user, batch_id, f.digest.data),
                 "Submitted: one proposal per item. A second reviewer must approve the batch.")


@bp.route("/bulk/<batch_id>/approve", methods=["POST"])
@role_required("reviewer")
def bulk_approve(batch_id: str):
    """Approve the batch by its digest (BULK-3, BULK-4; makers refused, FOUR-1)."""
    from app.services.bulk.batch_approval import approve_batch

    return _step(batch_id, DigestForm(), lambda f: approve_batch(current_user, batch_id, f.digest.data),
                 lambda result: f"Your approval is recorded; the policy still waits: {result['waiting']}."
                 if "waiting" in result else "Approved: its items are queued for delivery; this page follows them.")


@bp.route("/bulk/<batch_id>/reject", methods=["POST"])
@role_required("reviewer")
def bulk_reject(batch_id: str):
    """Reject the batch (BULK-3): nothing is sent."""
    from app.services.bulk.batch_approval import reject_batch

    return _step(batch_id, RejectForm(),
                 lambda f: reject_batch(current_user, batch_id, f.digest.data, f.reason.data or ""),
                 lambda result: "Your rejection is recorded; it does not veto the batch yet."
                 if result == "recorded" else "Rejected: nothing will be sent.")


def _controls():
    """The pause, resume and cancel services (BULK-7), imported when a step is asked."""
    from app.services.bulk import controls

    return controls


@bp.route("/bulk/<batch_id>/pause", methods=["POST"])
@role_required(*CONTROL_ROLES)
def bulk_pause(batch_id: str):
    """Hold the batch's waiting items (BULK-7)."""
    return _step(batch_id, ControlForm(), lambda f: _controls().pause_batch(current_user, batch_id),
                 "Paused: items not yet sent are held until you resume.")


@bp.route("/bulk/<batch_id>/resume", methods=["POST"])
@role_required(*CONTROL_ROLES)
def bulk_resume(batch_id: str):
    """Release a paused batch (BULK-7)."""
    return _step(batch_id, ControlForm(), lambda f: _controls().resume_batch(current_user, batch_id), "Resumed.")


@bp.route("/bulk/<batch_id>/cancel", methods=["POST"])
@role_required(*CONTROL_ROLES)
def bulk_cancel(batch_id: str):
    """Cancel the batch: every item ends applied, cancelled before sending, or failed (BULK-7)."""
    return _step(batch_id, ReasonForm(), lambda f: _controls().cancel_batch(current_user, batch_id, f.reason.data),
                 "Cancelled: nothing more is sent; items already sent end as the platform answers.")


@bp.route("/bulk/<batch_id>/undo", methods=["POST"])
@role_required(*CONTROL_ROLES)
def bulk_undo(batch_id: str):
    """Start the undo of what this batch applied: a compensation batch (BULK-8)."""
    form = ReasonForm()
    try:
        _check_control(batch_id, form)
        from app.services.bulk.undo import start_undo  # BULK-8's service

        undo_id = start_undo(current_user, batch_id, form.reason.data)
    except _Refusal as refusal:
        return _refused(batch_id, refusal.error)
    except ApiError as error:
        return _refused(batch_id, error)
    flash("Undo prepared as a new batch: check it; a second reviewer must approve it.", "ok")
    return redirect(url_for("console.bulk_batch", batch_id=undo_id), code=303)


@bp.get("/bulk/<batch_id>/submit")
@bp.get("/bulk/<batch_id>/approve")
@bp.get("/bulk/<batch_id>/reject")
@bp.get("/bulk/<batch_id>/pause")
@bp.get("/bulk/<batch_id>/resume")
@bp.get("/bulk/<batch_id>/cancel")
@bp.get("/bulk/<batch_id>/undo")
@role_required(*VIEW_ROLES)
def bulk_step_reloaded(batch_id: str):
    """A reload of a refused step's page shows the batch, not 405."""
    _detail(batch_id, with_drift=False)
    return redirect(url_for("console.bulk_batch", batch_id=batch_id), code=303)

