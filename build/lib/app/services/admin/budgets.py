"""Budgets for the admin screens: create a budget for a workflow version, a
component version or a queue; change its limit; deactivate and reactivate it.
Creating, raising, deactivating and reactivating are changes for a second admin
(FOUR-2, FOUR-4); lowering a limit applies at once.

A budget bounds how many actions (metric ``actions``) may be delivered for its
scope per fixed window; delivery reserves against it (`app.services.lifecycle.budget_reservations`).
One budget per scope: a deactivated budget is reactivated, not created again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    Budget,
    ComponentDefinition,
    ComponentVersion,
    OperatorUser,
    Queue,
    WorkflowDefinition,
    WorkflowVersion,
)
from app.models.budgets import BUDGET_SCOPES
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.components import component_version_choices
from app.services.admin.input import change_key, parse_int, plausible_id
from app.services.admin.integrations import list_queues
from app.services.admin.workflows import workflow_version_choices
from app.services.lifecycle.budget_reservations import window_start
from app.services.uow import UnitOfWork, unit_of_work

METRIC = "actions"
MIN_WINDOW_SECONDS = 60
MAX_WINDOW_SECONDS = 2_678_400  # 31 days
MAX_LIMIT = 1_000_000
SCOPE_MODELS = {"workflow": WorkflowVersion, "component": ComponentVersion, "queue": Queue}


@dataclass(frozen=True)
class BudgetRow:
    """A budget with its scope named and its current window's usage.

    Attributes:
        used_now: actions used in the window holding now (0 when the stored
            window has ended).
        current_window_start: start of the window holding now.
    """

    budget: Budget
    scope_label: str
    used_now: int
    current_window_start: datetime


def scope_choices(installation_id: str) -> dict[str, list[tuple[str, str]]]:
    """What a budget can bound: {scope type: [(id, label), ...]} of the installation."""
    return {
        "workflow": workflow_version_choices(installation_id),
        "component": component_version_choices(installation_id),
        "queue": [(q.id, q.name) for q in list_queues(installation_id)],
    }


def list_budgets(installation_id: str) -> list[BudgetRow]:
    """The installation's budgets: active first, then by scope."""
    labels = {
        (scope_type, scope_id): label
        for scope_type, options in scope_choices(installation_id).items()
        for scope_id, label in options
    }
    now = utcnow()
    rows = []
    for budget in db.session.scalars(
        select(Budget)
        .where(Budget.installation_id == installation_id)
        .order_by(Budget.active.desc(), Budget.scope_type, Budget.created_at, Budget.id)
    ):
        current = window_start(now, budget.window_seconds)
        used = budget.used_amount if budget.window_start == current else 0
        label = labels.get((budget.scope_type, budget.scope_id), budget.scope_id)
        rows.append(BudgetRow(budget, label, used, current))
    return rows


def _limit(value) -> int:
    return parse_int(
        value,
        code="budget_limit_invalid",
        field="limit_amount",
        minimum=1,
        maximum=MAX_LIMIT,
        message=f"The limit is a whole number of actions from 1 to {MAX_LIMIT:,}.",
    )


def _scope_target(session, installation_id: str, scope_type: str, scope_id: Any):
    target = session.get(SCOPE_MODELS[scope_type], scope_id) if plausible_id(scope_id) else None
    if target is None or target.installation_id != installation_id:
        raise ApiError(
            400,
            "budget_scope_invalid",
            f"Choose one of this installation's {scope_type} {'queues' if scope_type == 'queue' else 'versions'}.",
            "scope_id",
        )
    return target


def _apply_create(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    scope_type, scope_id = content["scope_type"], content["scope_id"]
    _scope_target(uow.session, installation_id, scope_type, scope_id)
    existing = uow.session.scalar(
        select(Budget).where(
            Budget.installation_id == installation_id,
            Budget.scope_type == scope_type,
            Budget.scope_id == scope_id,
            Budget.metric == METRIC,
        )
    )
    if existing is not None:
        state = "an active" if existing.active else "a deactivated"
        raise ApiError(
            409,
            "budget_exists",
            f"This scope has {state} budget already; change its limit"
            f"{'' if existing.active else ' or reactivate it'} instead.",
            "scope_id",
        )
    budget = Budget(
        installation_id=installation_id,
        scope_type=scope_type,
        scope_id=scope_id,
        metric=METRIC,
        limit_amount=content["limit_amount"],
        window_seconds=content["window_seconds"],
        used_amount=0,
        active=True,
    )
    uow.session.add(budget)
    try:
        uow.session.flush()
    except IntegrityError as error:
        raise ApiError(409, "budget_exists", "This scope has a budget already.", "scope_id") from error
    uow.audit(
        installation_id,
        f"admin:budget-created:{budget.id}",
        "admin.budget_created",
        context.actor,
        "budget",
        budget.id,
        context.details({"metric": METRIC, **content}),
    )
    return {"budget_id": budget.id}


def _scope_name(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    """What a new budget bounds, named (FOUR-10); refuses a scope that is not the installation's."""
    _scope_target(session, installation_id, content["scope_type"], content["scope_id"])
    probe = Budget(scope_type=content["scope_type"], scope_id=content["scope_id"])
    return {"scope": _scope_label(session, probe)}


BUDGET_CREATE = ChangeType(
    kind=ChangeKind.BUDGET_CREATE,
    subject_type="budget",
    current=_scope_name,
    summary=lambda content, current: (
        f"New budget of {(current or {}).get('scope', content['scope_type'])}: "
        f"{content['limit_amount']} actions per {content['window_seconds']} s"
    ),
    apply=_apply_create,
    display=lambda content, current: (
        {},
        {
            "scope": (current or {}).get("scope", f"{content['scope_type']} {content['scope_id']}"),
            "limit_amount": content["limit_amount"],
            "window_seconds": content["window_seconds"],
        },
    ),
)


def create_budget(
    operator: OperatorUser, *, scope_type: str, scope_id: str, limit_amount: int | str, window_seconds: int | str
) -> PendingChange:
    """Propose an active budget of actions for one scope of the operator's installation.
    A budget lets bounded automation of its scope run up to its limit, so it applies
    only when a second admin approves (FOUR-4).

    Args:
        operator: the admin doing it.
        scope_type: ``workflow``, ``component`` or ``queue``.
        scope_id: a workflow version, component version or queue id of the installation,
            matching `scope_type`.
        limit_amount: actions per window, 1..1,000,000 (int or decimal text).
        window_seconds: the window's length in seconds, 60..2,678,400 (31 days).

    Returns:
        The `PendingChange` stored (approving it returns ``{"budget_id": ...}``).

    Raises:
        ApiError: 400 ``budget_scope_invalid``, ``budget_limit_invalid``,
            ``budget_window_invalid``; 409 ``budget_exists`` (one budget per scope).
    """
    if scope_type not in BUDGET_SCOPES:
        raise ApiError(400, "budget_scope_invalid", "The scope is a workflow, a component or a queue.", "scope_type")
    limit = _limit(limit_amount)
    window = parse_int(
        window_seconds,
        code="budget_window_invalid",
        field="window_seconds",
        minimum=MIN_WINDOW_SECONDS,
        maximum=MAX_WINDOW_SECONDS,
        message=f"The window is a whole number of seconds from {MIN_WINDOW_SECONDS} to {MAX_WINDOW_SECONDS:,}.",
    )
    content = {"scope_type": scope_type, "scope_id": scope_id, "limit_amount": limit, "window_seconds": window}
    with unit_of_work() as uow:
        outcome = submit(uow, operator, BUDGET_CREATE, content)
        uow.commit()
    return outcome


def _budget_for_change(session, installation_id: str, budget_id: Any) -> Budget:
    budget = session.get(Budget, budget_id) if plausible_id(budget_id) else None
    if budget is None or budget.installation_id != installation_id:
        raise ApiError(404, "budget_not_found", "No such budget.")
    return budget


def require_budget(installation_id: str, budget_id: str) -> None:
    """Raise 404 ``budget_not_found`` unless the budget is this installation's."""
    from app.extensions import db

    budget = db.session.get(Budget, budget_id) if isinstance(budget_id, str) and len(budget_id) <= 200 else None
    if budget is None or budget.installation_id != installation_id:
        raise ApiError(404, "budget_not_found", "No such budget.")


def _scope_label(session, budget: Budget) -> str:
    """The budget's scope as people read it, e.g. ``workflow Enforcement v1``."""
    if budget.scope_type == "queue":
        queue = session.get(Queue, budget.scope_id)
        return f"queue {queue.name if queue else budget.scope_id}"
    model, parent = (
        (WorkflowVersion, WorkflowDefinition)
        if budget.scope_type == "workflow"
        else (ComponentVersion, ComponentDefinition)
    )
    version = session.get(model, budget.scope_id)
    definition = session.get(parent, version.definition_id) if version else None
    name = f"{definition.name} v{version.version}" if definition else budget.scope_id
    return f"{budget.scope_type} {name}"


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    budget = _budget_for_change(session, installation_id, content["budget_id"])
    return {"scope": _scope_label(session, budget), "limit_amount": budget.limit_amount, "active": budget.active}


def _apply_limit(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    budget = _budget_for_change(uow.session, context.installation_id, content["budget_id"])
    before, limit = budget.limit_amount, content["limit_amount"]
    if before != limit:
        budget.limit_amount = limit
        uow.audit(
            context.installation_id,
            change_key("budget-limit", budget.id),
            "admin.budget_limit_changed",
            context.actor,
            "budget",
            budget.id,
            context.details({"before": before, "after": limit}),
        )
    return {"budget_id": budget.id}


def _apply_active(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    budget = _budget_for_change(uow.session, context.installation_id, content["budget_id"])
    active = content["active"]
    if budget.active != active:
        budget.active = active
        verb = "activated" if active else "deactivated"
        uow.audit(
            context.installation_id,
            change_key(f"budget-{verb}", budget.id),
            f"admin.budget_{verb}",
            context.actor,
            "budget",
            budget.id,
            context.details({"scope_type": budget.scope_type, "scope_id": budget.scope_id}),
        )
    return {"budget_id": budget.id}


BUDGET_LIMIT = ChangeType(
    kind=ChangeKind.BUDGET_LIMIT,
    subject_type="budget",
    subject="budget_id",
    current=_current,
    summary=lambda content, current: (
        f"Budget of {current['scope']}: limit {current['limit_amount']} → {content['limit_amount']}"
    ),
    apply=_apply_limit,
)
BUDGET_ACTIVE = ChangeType(
    kind=ChangeKind.BUDGET_ACTIVE,
    subject_type="budget",
    subject="budget_id",
    current=_current,
    summary=lambda content, current: (
        f"Budget of {current['scope']}: {'reactivate' if content['active'] else 'deactivate'}"
    ),
    apply=_apply_active,
)


def change_budget_limit(operator: OperatorUser, budget_id: str, limit_amount: int | str) -> PendingChange | None:
    """Change a budget's limit. The current window keeps what it used: a lower limit
    than that refuses further reservations until the window ends. A higher limit is
    a change for a second admin (FOUR-2): it is stored pending.

    Args:
        limit_amount: actions per window, 1..1,000,000 (int or decimal text).

    Returns:
        None when applied, or the `PendingChange` stored.

    Raises:
        ApiError: 400 ``budget_limit_invalid``; 404 ``budget_not_found``.
    """
    limit = _limit(limit_amount)
    with unit_of_work() as uow:
        outcome = submit(uow, operator, BUDGET_LIMIT, {"budget_id": budget_id, "limit_amount": limit})
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else None


def set_budget_active(operator: OperatorUser, budget_id: str, active: bool) -> PendingChange | None:
    """Deactivate a budget (its scope is no longer bounded) or reactivate it.
    Setting the state it has changes nothing. Deactivating is a change for a second
    admin (FOUR-2), and so is reactivating it (FOUR-4): either is stored pending.

    Returns:
        None when nothing changes, or the `PendingChange` stored.

    Raises:
        ApiError: 404 ``budget_not_found``.
    """
    with unit_of_work() as uow:
        outcome = submit(uow, operator, BUDGET_ACTIVE, {"budget_id": budget_id, "active": bool(active)})
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else None
