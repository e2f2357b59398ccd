"""Admin: budgets that bound automation (limit per window, per scope)."""

from __future__ import annotations

from flask import flash, redirect, render_template, url_for
from flask_login import current_user
from wtforms.fields.choices import SelectChoice

from app.domain.errors import ApiError
from app.services.admin import budgets as service
from app.services.admin.changes import PendingChange

from ..decorators import role_required
from .blueprint import bp
from .changes import answer_pending
from .common import EDIT_ROLES, VIEW_ROLES, form_invalid, refused
from .forms import ActionForm, BudgetForm, BudgetLimitForm

SCOPE_GROUPS = {"workflow": "Workflow versions", "component": "Component versions", "queue": "Queues"}


def _scope_choices(form: BudgetForm) -> BudgetForm:
    options = service.scope_choices(current_user.installation_id)
    form.scope_id.choices = [
        SelectChoice(id, label, optgroup=SCOPE_GROUPS[kind], render_kw={"data-scope-type": kind})
        for kind, choices in options.items()
        for id, label in choices
    ]
    return form


def _page(form=None, limit_form=None, limit_budget_id=None, error=None, status=200):
    """The budgets page. A refused limit change shows its form (and the value typed)
    in the row of `limit_budget_id`."""
    return render_template(
        "admin/budgets.html",
        rows=service.list_budgets(current_user.installation_id),
        form=_scope_choices(form or BudgetForm(formdata=None)),
        limit_form=limit_form,
        limit_budget_id=limit_budget_id,
        action_form=ActionForm(),
        error=error,
    ), status


@bp.route("/budgets")
@role_required(*VIEW_ROLES)
def budgets():
    return _page()


@bp.route("/budgets", methods=["POST"])
@role_required(*EDIT_ROLES)
def budget_create():
    form = _scope_choices(BudgetForm())
    if not form.validate():
        return _page(form, error=form_invalid(), status=400)
    try:
        pending = service.create_budget(
            current_user,
            scope_type=form.scope_type.data,
            scope_id=form.scope_id.data,
            limit_amount=form.limit_amount.data,
            window_seconds=form.window_seconds.data,
        )
    except ApiError as error:
        return _page(refused(form, error), error=error, status=error.status)
    flash("Budget stored: it applies when a second admin approves this change.", "ok")
    return answer_pending(pending)


@bp.route("/budgets/<budget_id>/limit", methods=["POST"])
@role_required(*EDIT_ROLES)
def budget_limit(budget_id: str):
    service.require_budget(current_user.installation_id, budget_id)  # another tenant's id: 404 before anything
    form = BudgetLimitForm()
    if not form.validate():
        return _page(limit_form=form, limit_budget_id=budget_id, error=form_invalid(), status=400)
    try:
        outcome = service.change_budget_limit(current_user, budget_id, form.limit_amount.data)
    except ApiError as error:
        form = refused(form, error)
        return _page(limit_form=form, limit_budget_id=budget_id, error=error, status=error.status)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.budgets"), code=303)


def _set_active(budget_id: str, active: bool):
    if not ActionForm().validate():
        return _page(error=form_invalid(), status=400)
    outcome = service.set_budget_active(current_user, budget_id, active)
    if isinstance(outcome, PendingChange):
        return answer_pending(outcome)
    return redirect(url_for("admin.budgets"), code=303)


@bp.route("/budgets/<budget_id>/deactivate", methods=["POST"])
@role_required(*EDIT_ROLES)
def budget_deactivate(budget_id: str):
    return _set_active(budget_id, False)


@bp.route("/budgets/<budget_id>/activate", methods=["POST"])
@role_required(*EDIT_ROLES)
def budget_activate(budget_id: str):
    return _set_active(budget_id, True)
