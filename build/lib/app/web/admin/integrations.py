"""Admin: integrations (platforms) and their API tokens."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.services.admin import integrations as service
from app.services.admin.token_changes import propose_token
from app.services.uow import Actor

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
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


def _detail_page(integration_id: str, token_form=None, error=None, status=200):
    detail = service.integration_detail(current_user.installation_id, integration_id)
    token_form = token_form or TokenForm(formdata=None)
    token_form.succeeds.choices = [  # FOUR-8: live or revoked tokens of this integration
        SelectChoice(
            t.id,
            f"{t.token_prefix}… {t.label or ''} (created {t.created_at:%Y-%m-%d %H:%M} UTC"
            + (", revoked)" if t.revoked_at else ")"),
        )
        for t in detail.tokens
    ]
    return render_template(
        "admin/integration.html",
        d=detail,
        token_form=token_form,
        action_form=ActionForm(),
        error=error,
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
    """Propose a token for a second admin (FOUR-4): its plaintext is shown on this
    answer only (201, the change's page); it authenticates nothing until approved."""
    form = TokenForm()
    if not form.validate():
        return _detail_page(integration_id, form, form_invalid(), status=400)
    try:
        pending = propose_token(current_user, integration_id, form.label.data or "", form.succeeds.data or [])
    except ApiError as error:
        return _detail_page(integration_id, refused(form, error), error, status=error.status)
    return answer_pending(pending)


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
