"""Admin: workflows and their versions (graph, authority mode, active flag)."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from flask_login import current_user

from app.domain.errors import ApiError
from app.services.admin import workflows as service
from app.services.admin.changes import PendingChange

from ..decorators import role_required
from ..formatting import pretty_json
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ActionForm, WorkflowForm, WorkflowVersionForm


def _list_page(form=None, error=None, status=200):
    rows = service.list_workflows(current_user.installation_id)
    return render_template(
        "admin/workflows.html", rows=rows, form=form or WorkflowForm(formdata=None), error=error
    ), status


def _version_form_for(listing: service.WorkflowListing) -> WorkflowVersionForm:
    latest = listing.latest
    if latest is None:
        return WorkflowVersionForm(formdata=None)
    return WorkflowVersionForm(formdata=None, authority_mode=latest.authority_mode, graph=pretty_json(latest.graph))


def _detail_page(definition_id: str, form=None, error=None, status=200):
    listing = service.workflow_detail(current_user.installation_id, definition_id)
    return render_template(
        "admin/workflow.html",
        w=listing,
        form=form or _version_form_for(listing),
        action_form=ActionForm(),
        error=error,
    ), status


@bp.route("/workflows")
@role_required(*VIEW_ROLES)
def workflows():
    return _list_page()


@bp.route("/workflows", methods=["POST"])
@role_required(*EDIT_ROLES)
def workflow_create():
    form = WorkflowForm()
    if not form.validate():
        return _list_page(form, form_invalid(), 400)
    try:
        outcome = service.create_workflow(
            current_user,
            name=form.name.data,
            slug=form.slug.data,
            authority_mode=form.authority_mode.data,
            graph=form.graph.data,
            active=form.active.data,
        )
    except ApiError as error:
        return _list_page(refused(form, error), error, error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    definition_id, _ = outcome
    return redirect(url_for("admin.workflow", definition_id=definition_id), code=303)


@bp.route("/workflows/<definition_id>")
@role_required(*VIEW_ROLES)
def workflow(definition_id: str):
    return _detail_page(definition_id)


@bp.route("/workflows/<definition_id>/versions", methods=["POST"])
@role_required(*EDIT_ROLES)
def workflow_version_create(definition_id: str):
    form = WorkflowVersionForm()
    if not form.validate():
        return _detail_page(definition_id, form, form_invalid(), 400)
    try:
        outcome = service.create_workflow_version(
            current_user,
            definition_id,
            authority_mode=form.authority_mode.data,
            graph=form.graph.data,
            active=form.active.data,
        )
    except ApiError as error:
        return _detail_page(definition_id, refused(form, error), error, error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.workflow", definition_id=definition_id), code=303)


def _set_active(definition_id: str, version_id: str, active: bool):
    if not ActionForm().validate():
        return _detail_page(definition_id, error=form_invalid(), status=400)
    outcome = service.set_workflow_version_active(current_user, definition_id, version_id, active)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.workflow", definition_id=definition_id), code=303)


@bp.route("/workflows/<definition_id>/versions/<version_id>/activate", methods=["POST"])
@role_required(*EDIT_ROLES)
def workflow_version_activate(definition_id: str, version_id: str):
    return _set_active(definition_id, version_id, True)


@bp.route("/workflows/<definition_id>/versions/<version_id>/deactivate", methods=["POST"])
@role_required(*EDIT_ROLES)
def workflow_version_deactivate(definition_id: str, version_id: str):
    return _set_active(definition_id, version_id, False)
