"""Admin: integrations (platforms) and their API tokens."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.services.admin import integrations as service
from app.services.uow import Actor

from ..decorators import role_required
from .blueprint import bp
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ActionForm, IntegrationForm, TokenForm


def _queue_choices(form: IntegrationForm) -> IntegrationForm:
    queues = service.list_queues(current_user.installation_id)
    form.default_queue_id.choices = [SelectChoice("", "(none)")] + [SelectChoice(q.id, q.name) for q in queues]
    return form


def _list_page(form=None, error=None, status=200):
    rows = service.list_integrations(current_user.installation_id)
    form = _queue_choices(form or IntegrationForm(formdata=None))
    return render_template("admin/integrations.html", rows=rows, form=form, error=error), status


def _detail_page(integration_id: str, token_form=None, error=None, issued=None, status=200):
    detail = service.integration_detail(current_user.installation_id, integration_id)
    return render_template(
        "admin/integration.html",
        d=detail,
        token_form=token_form or TokenForm(formdata=None),
        action_form=ActionForm(),
        error=error,
        issued=issued,
    ), status


@bp.route("/integrations")
@role_required(*VIEW_ROLES)
def integrations():
    return _list_page()


@bp.route("/integrations", methods=["POST"])
@role_required(*EDIT_ROLES)
def integration_create():
    form = _queue_choices(IntegrationForm())
    if not form.validate():
        return _list_page(form, form_invalid(), 400)
    try:
        integration_id = service.create_integration(
            current_user, name=form.name.data, slug=form.slug.data, default_queue_id=form.default_queue_id.data
        )
    except ApiError as error:
        return _list_page(refused(form, error), error, error.status)
    return redirect(url_for("admin.integration", integration_id=integration_id), code=303)


@bp.route("/integrations/<integration_id>")
@role_required(*VIEW_ROLES)
def integration(integration_id: str):
    return _detail_page(integration_id)


@bp.route("/integrations/<integration_id>/tokens", methods=["POST"])
@role_required(*EDIT_ROLES)
def token_issue(integration_id: str):
    """Issue a token and show its plaintext on this answer only (201); only its hash is kept."""
    form = TokenForm()
    if not form.validate():
        return _detail_page(integration_id, form, form_invalid(), status=400)
    try:
        issued = service.issue_token(
            integration_id,
            label=form.label.data or "",
            actor=Actor("operator", current_user.id),
            installation_id=current_user.installation_id,
        )
    except ApiError as error:
        return _detail_page(integration_id, refused(form, error), error, status=error.status)
    return _detail_page(integration_id, issued=issued, status=201)


@bp.route("/integrations/<integration_id>/tokens/<token_id>/revoke", methods=["POST"])
@role_required(*EDIT_ROLES)
def token_revoke(integration_id: str, token_id: str):
    form = ActionForm()
    if not form.validate():
        return _detail_page(integration_id, error=form_invalid(), status=400)
    service.revoke_token(
        token_id,
        installation_id=current_user.installation_id,
        actor=Actor("operator", current_user.id),
        integration_id=integration_id,
    )
    return redirect(url_for("admin.integration", integration_id=integration_id), code=303)
