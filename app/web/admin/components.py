"""Admin: components (action types) and their versions."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.services.admin import components as service
from app.services.admin.dsa_config import component_restriction
from app.services.admin.changes import PendingChange
from app.services.admin.connections import connection_version_choices
from app.services.admin.version_retirement import retire_component_version

from ..decorators import role_required
from ..formatting import pretty_json
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, raise_if_not_found, refused
from .forms import ActionForm, ComponentForm, ComponentVersionForm


def _spec(form: ComponentVersionForm) -> service.ComponentSpec:
    return service.ComponentSpec(
        implementation_kind=form.implementation_kind.data,
        implementation_reference=form.implementation_reference.data,
        connection_version_id=form.connection_version_id.data,
        input_schema=form.input_schema.data,
        output_schema=form.output_schema.data,
        approval_mode=form.approval_mode.data,
        irreversible=bool(form.irreversible.data),
    )


def _connection_choices(form):
    form.connection_version_id.choices = [
        SelectChoice(id, label) for id, label in connection_version_choices(current_user.installation_id)
    ]
    return form


def _list_page(form=None, error=None, status=200):
    rows = service.list_components(current_user.installation_id)
    form = _connection_choices(form or ComponentForm(formdata=None))
    return render_template("admin/components.html", rows=rows, form=form, error=error), status


def _version_form_for(listing: service.ComponentListing) -> ComponentVersionForm:
    latest = listing.latest
    if latest is None:
        return ComponentVersionForm(formdata=None)
    return ComponentVersionForm(
        formdata=None,
        implementation_kind=latest.implementation_kind,
        implementation_reference=latest.implementation_reference,
        connection_version_id=latest.connection_version_id,
        input_schema=pretty_json(latest.input_schema),
        output_schema=pretty_json(latest.output_schema),
        approval_mode=latest.approval_mode,
        irreversible=latest.irreversible,
    )


def _detail_page(definition_id: str, form=None, error=None, status=200):
    listing = service.component_detail(current_user.installation_id, definition_id)
    form = _connection_choices(form or _version_form_for(listing))
    dsa_restriction = component_restriction(current_user.installation_id, listing.definition.slug)  # DSA-1
    return render_template(
        "admin/component.html", c=listing, form=form, action_form=ActionForm(), error=error,
        dsa_restriction=dsa_restriction,
    ), status


@bp.route("/components")
@role_required(*VIEW_ROLES)
def components():
    return _list_page()


@bp.route("/components", methods=["POST"])
@role_required(*EDIT_ROLES)
def component_create():
    form = _connection_choices(ComponentForm())
    if not form.validate():
        return _list_page(form, form_invalid(), 400)
    try:
        outcome = service.create_component(current_user, name=form.name.data, slug=form.slug.data, spec=_spec(form))
    except ApiError as error:
        return _list_page(refused(form, error), error, error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    definition_id, _ = outcome
    return redirect(url_for("admin.component", definition_id=definition_id), code=303)


@bp.route("/components/<definition_id>")
@role_required(*VIEW_ROLES)
def component(definition_id: str):
    return _detail_page(definition_id)


@bp.route("/components/<definition_id>/versions", methods=["POST"])
@role_required(*EDIT_ROLES)
def component_version_create(definition_id: str):
    form = _connection_choices(ComponentVersionForm())
    if not form.validate():
        return _detail_page(definition_id, form, form_invalid(), 400)
    try:
        outcome = service.create_component_version(current_user, definition_id, _spec(form))
    except ApiError as error:
        return _detail_page(definition_id, refused(form, error), error, error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.component", definition_id=definition_id), code=303)


@bp.route("/components/<definition_id>/versions/<version_id>/retire", methods=["POST"])
@role_required(*EDIT_ROLES)
def component_version_retire(definition_id: str, version_id: str):
    if not ActionForm().validate():
        return _detail_page(definition_id, error=form_invalid(), status=400)
    try:
        outcome = retire_component_version(current_user, definition_id, version_id)
    except ApiError as error:
        raise_if_not_found(error)
        return _detail_page(definition_id, error=error, status=error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.component", definition_id=definition_id), code=303)
