"""Admin: connections and their versions. Secrets are never shown after saving;
a signing secret generated now is shown once, on the answer to the save."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.services.admin import connections as service
from app.services.admin.changes import PendingChange
from app.services.admin.connection_create import create_connection
from app.services.admin.integrations import list_integrations
from app.services.lifecycle import breaker
from app.services.read import connection_status as connection_views

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ConnectionForm, ConnectionVersionForm


def _settings(form: ConnectionVersionForm) -> service.ConnectionSettings:
    return service.ConnectionSettings(
        base_url=form.base_url.data,
        bearer_token_action=form.bearer_token_action.data,
        bearer_token=form.bearer_token.data,
        signing_secret_action=form.signing_secret_action.data,
        timeout_seconds=form.timeout_seconds.data,
        allowed_hosts=form.allowed_hosts.data,
        breaker_failure_threshold=form.breaker_failure_threshold.data,
        breaker_first_probe_seconds=form.breaker_first_probe_seconds.data,
        breaker_max_probe_seconds=form.breaker_max_probe_seconds.data,
        failure_window_hours=form.failure_window_hours.data,
        rate_limit_per_second=form.rate_limit_per_second.data,
    )


def _integration_choices(form: ConnectionForm) -> ConnectionForm:
    rows = list_integrations(current_user.installation_id)
    form.integration_id.choices = [SelectChoice("", "(none)")] + [
        SelectChoice(r.integration.id, r.integration.name) for r in rows
    ]
    return form


def _list_page(form=None, error=None, status=200):
    rows = service.list_connections(current_user.installation_id)
    form = _integration_choices(form or ConnectionForm(formdata=None))
    return render_template("admin/connections.html", rows=rows, form=form, error=error), status


def _version_form_for(listing: service.ConnectionListing) -> ConnectionVersionForm:
    latest = listing.latest
    if latest is None:
        return ConnectionVersionForm(formdata=None)
    return ConnectionVersionForm(
        formdata=None,
        base_url=latest.base_url,
        bearer_token_action="keep",
        signing_secret_action="keep",
        timeout_seconds=f"{latest.timeout_seconds:g}",
        allowed_hosts="\n".join(latest.allowed_hosts),
        breaker_failure_threshold=str(latest.breaker_failure_threshold),
        breaker_first_probe_seconds=f"{latest.breaker_first_probe_seconds:g}",
        breaker_max_probe_seconds=f"{latest.breaker_max_probe_seconds:g}",
        failure_window_hours=f"{latest.failure_window_seconds / 3600:g}",
        rate_limit_per_second="" if latest.rate_limit_per_second is None else f"{latest.rate_limit_per_second:g}",
    )


def _detail_page(connection_id: str, form=None, error=None, saved=None, status=200):
    listing = service.connection_detail(current_user.installation_id, connection_id)
    from app.extensions import db

    health = connection_views.health_views(db.session, current_user.installation_id, listing.connection.id)
    return render_template(
        "admin/connection.html",
        c=listing,
        health=health[0] if health else None,
        health_history=connection_views.history(db.session, current_user.installation_id, listing.connection.id),
        form=form or _version_form_for(listing),
        error=error,
        saved=saved,
    ), status


@bp.route("/connections")
@role_required(*VIEW_ROLES)
def connections():
    return _list_page()


@bp.route("/connections", methods=["POST"])
@role_required(*EDIT_ROLES)
def connection_create():
    form = _integration_choices(ConnectionForm())
    if not form.validate():
        return _list_page(form, form_invalid(), 400)
    try:
        pending = create_connection(
            current_user,
            name=form.name.data,
            slug=form.slug.data,
            integration_id=form.integration_id.data,
            settings=_settings(form),
        )
    except ApiError as error:
        return _list_page(refused(form, error), error, error.status)
    return answer_pending(pending)


@bp.route("/connections/<connection_id>")
@role_required(*VIEW_ROLES)
def connection(connection_id: str):
    return _detail_page(connection_id)


@bp.route("/connections/<connection_id>/versions", methods=["POST"])
@role_required(*EDIT_ROLES)
def connection_version_create(connection_id: str):
    form = ConnectionVersionForm()
    if not form.validate():
        return _detail_page(connection_id, form, form_invalid(), status=400)
    try:
        saved = service.create_connection_version(current_user, connection_id, _settings(form))
    except ApiError as error:
        return _detail_page(connection_id, refused(form, error), error, status=error.status)
    if isinstance(saved, PendingChange):
        return answer_pending(saved)
    if saved.signing_secret:
        return _detail_page(connection_id, saved=saved, status=201)
    return redirect(url_for("admin.connection", connection_id=connection_id), code=303)


@bp.route("/connections/<connection_id>/re-enable", methods=["POST"])
@role_required(*EDIT_ROLES)
def connection_re_enable(connection_id: str):
    """CONN-3: an admin re-enables a disabled endpoint; its held deliveries go at once
    (the CSRF token is checked app-wide)."""
    try:
        released = breaker.re_enable(current_user, connection_id)
    except ApiError as error:
        return _detail_page(connection_id, error=error, status=error.status)
    flash(f"Connection re-enabled; {released} held deliveries are due now.", "success")
    return redirect(url_for("admin.connection", connection_id=connection_id), code=303)


@bp.app_template_global()
def disabled_connection_banner() -> list[tuple[str, str, str | None]]:
    """The installation's disabled connections, for the banner admin pages show (CONN-3)."""
    from app.extensions import db

    if not current_user.is_authenticated or not current_user.has_role("admin"):
        return []
    return connection_views.disabled_connections(db.session, current_user.installation_id)
