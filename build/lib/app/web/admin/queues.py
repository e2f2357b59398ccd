"""Admin: each queue's time to decide (SPEC QUEUE-4), set by one admin (it changes no
action; declared in `app.domain.config_changes.SINGLE_ADMIN_WRITES`)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms import HiddenField, StringField

from app.domain.errors import ApiError
from app.domain.time_targets import target_words
from app.services.admin.queue_targets import queue_targets_table, set_queue_target
from app.web.errors import raise_for_json
from app.web.forms import ConsoleForm

from ..decorators import role_required
from .blueprint import bp
from .common import EDIT_ROLES, VIEW_ROLES


class TargetForm(ConsoleForm):
    queue = HiddenField()
    target = StringField("Time to decide")


def _page(error=None, status=200):
    return render_template("admin/queues.html", queues=queue_targets_table(current_user.installation_id),
                           form=TargetForm(formdata=None), words=target_words, error=error), status


@bp.route("/queues")
@role_required(*VIEW_ROLES)
def queues():
    return _page()


@bp.route("/queues", methods=["POST"])
@role_required(*EDIT_ROLES)
def queue_target_set():
    """Set one queue's time to decide; applies at once (a target changes no action)."""
    form = TargetForm()
    try:
        if not form.validate():
            raise ApiError(400, "form_invalid", "The form expired; reload the page and try again.")
        seconds = set_queue_target(current_user, form.queue.data or "", form.target.data)
    except ApiError as error:
        raise_for_json(error)
        return _page(error, error.status)
    flash(f"The queue {form.queue.data} now has {target_words(seconds)} to decide.", "ok")
    return redirect(url_for("admin.queues"), code=303)
