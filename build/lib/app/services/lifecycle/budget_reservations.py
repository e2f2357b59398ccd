"""Budgets for delivery: reserve one action per scope, settle after the attempt
(SPEC DLV-3).

Each budget keeps the current window's usage on its own row; a reservation moves
it with one conditional UPDATE (``used + amount <= limit``), so concurrent workers
can never overspend. An exhausted budget defers the delivery until its window
frees; nothing is sent. Bounded automation must be bounded: a bounded_auto
proposal that no active budget covers fails before anything is sent (SPEC FOUR-3).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, bindparam, case, or_, select, update

from app.domain.clock import utcnow
from app.domain.errors import ActionError
from app.models import Budget, BudgetReservation, new_id, statements
from app.services.uow import RetryWithSavepoints, UnitOfWork


class BudgetExhausted(ActionError):
    """A budget has no room in its window; retry when the window frees."""

    def __init__(self, budget_id: str, delay_seconds: float) -> None:
        super().__init__("budget_exhausted", retryable=True, delay_seconds=delay_seconds)
        self.budget_id = budget_id


class BudgetMissing(ActionError):
    """No active budget covers a bounded-automation proposal (FOUR-3): terminal, nothing sent."""

    def __init__(self) -> None:
        super().__init__("action_budget_missing", retryable=False)


@dataclass(frozen=True)
class Scope:
    type: str  # workflow, component, queue
    id: str


def window_start(now: datetime, window_seconds: int) -> datetime:
    """Start of the fixed window holding `now` (windows are aligned to the epoch)."""
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % window_seconds, tz=now.tzinfo)


def reserve(
    uow: UnitOfWork,
    installation_id: str,
    scopes: list[Scope],
    operation_id: str,
    attempt_id: str,
    amount: int = 1,
    *,
    required: bool = False,
    savepoint: bool = True,
    known: dict | None = None,
) -> list[str]:
    """Reserve `amount` actions on every active budget of the scopes, all or none.

    Runs in the caller's unit of work, in a savepoint, so an exhausted budget leaves
    no partial reservation behind.

    Args:
        uow: the delivery's unit of work.
        installation_id: the tenant.
        scopes: workflow, component and queue scopes of the proposal.
        operation_id: the proposal's operation id.
        attempt_id: the attempt number, as text.
        required: a budget must cover the scopes (bounded automation, FOUR-3).
        savepoint: False when the caller already runs this in a savepoint that an
            exception rolls back (the delivery's checks do): one round trip pair less.
        known: the budgets this transaction already looked up, by scopes (a batch
            claim reserves for several proposals of one component); filled as it goes.

    Returns:
        The reservation ids (empty when no budget applies).

    Raises:
        BudgetExhausted: ``budget_exhausted`` with the seconds until the window frees.
        BudgetMissing: ``action_budget_missing`` when `required` and no active budget
            covers any of the scopes.
    """
    key = (installation_id, tuple(scopes))
    if known is not None and key in known:
        budgets = known[key]
    else:
        budgets = _budgets(uow, installation_id, scopes)
        if known is not None:
            known[key] = budgets
    if not budgets:
        if required:
            raise BudgetMissing()
        return []
    now = utcnow()
    reserved = []
    with uow.savepoint() if savepoint else contextlib.nullcontext():
        for budget in budgets:
            start = window_start(now, budget.window_seconds)
            if not _take_now_or_at_commit(uow, budget.id, start, amount):
                delay = (start + timedelta(seconds=budget.window_seconds) - now).total_seconds()
                raise BudgetExhausted(budget.id, max(1.0, delay))
            reservation_id = new_id("bres")
            uow.insert_ignore_later(
                BudgetReservation,
                dict(
                    id=reservation_id,
                    installation_id=installation_id,
                    budget_id=budget.id,
                    window_start=start,
                    operation_type="action_proposal",
                    operation_id=operation_id,
                    attempt_id=attempt_id,
                    amount=amount,
                    state="reserved",
                    created_at=now,
                ),
            )
            reserved.append(reservation_id)
    return reserved


def _budgets(uow: UnitOfWork, installation_id: str, scopes: list[Scope]) -> list[Budget]:
    if not scopes:
        return []
    matches = [and_(Budget.scope_type == s.type, Budget.scope_id == s.id) for s in scopes]
    return list(
        uow.session.scalars(
            select(Budget)
            .where(
                Budget.installation_id == installation_id,
                Budget.metric == "actions",
                Budget.active.is_(True),
                or_(*matches),
            )
            .order_by(Budget.id)  # a fixed order: no deadlock between two reservers
        )
    )


def _take_statement():
    """Take ``:amount`` from one budget's window starting ``:start``: the same window
    while it has room, or a new window (built once: `statements.prebuilt`)."""
    table = Budget.__table__
    start = bindparam("start", type_=table.c.window_start.type)
    amount = bindparam("amount", type_=table.c.used_amount.type)
    same_window = table.c.window_start == start
    new_window = or_(table.c.window_start.is_(None), table.c.window_start != start)
    return (
        update(table)
        .where(
            table.c.id == bindparam("budget_id"),
            or_(
                and_(same_window, table.c.used_amount + amount <= table.c.limit_amount),
                and_(new_window, table.c.limit_amount >= amount),
            ),
        )
        .values(used_amount=case((same_window, table.c.used_amount + amount), else_=amount), window_start=start)
    )


def _take(uow: UnitOfWork, budget_id: str, start: datetime, amount: int) -> bool:
    statement = statements.prebuilt(("budget-take",), _take_statement)
    params = {"budget_id": budget_id, "start": start, "amount": amount}
    return statements.run(uow.session, statement, params).rowcount == 1


def _take_now_or_at_commit(uow: UnitOfWork, budget_id: str, start: datetime, amount: int) -> bool:
    """Take `amount` from a budget's window (DLV-3).

    In a batch's first try (a unit of work without savepoints) the takes of the
    whole batch are added up and taken by one guarded UPDATE per budget just before
    the commit, so the budget's row is written, and locked, once and briefly. If
    the window has no room for all of them, the try is rolled back and run again
    with savepoints, taking member by member (the first that does not fit is
    deferred ``budget_exhausted`` and the rest are left unclaimed).
    """
    if uow.savepoints:
        return _take(uow, budget_id, start, amount)
    pending = uow.scratch.setdefault("budget_takes", {})
    key = (budget_id, start)
    if key not in pending:
        uow.before_commit(lambda: _take_pending(uow, key))
    pending[key] = pending.get(key, 0) + amount
    return True


def _take_pending(uow: UnitOfWork, key: tuple[str, datetime]) -> None:
    budget_id, start = key
    if not _take(uow, budget_id, start, uow.scratch["budget_takes"][key]):
        raise RetryWithSavepoints()


def _settle_statement():
    table = BudgetReservation.__table__
    return (
        update(table)
        .where(table.c.id.in_(bindparam("ids", expanding=True)), table.c.state == "reserved")
        .values(state=bindparam("state"), settled_at=bindparam("at", type_=table.c.settled_at.type))
        .returning(table.c.budget_id, table.c.window_start, table.c.amount)
    )


def _consume_statement():
    """One reservation consumed (run many at once: `UnitOfWork.write_later`)."""
    table = BudgetReservation.__table__
    return (
        update(table)
        .where(table.c.id == bindparam("reservation_id"), table.c.state == "reserved")
        .values(state="consumed", settled_at=bindparam("at", type_=table.c.settled_at.type))
    )


def settle(uow: UnitOfWork, reservation_ids: list[str], consumed: bool) -> None:
    """Settle reservations: consumed when the request may have left, else released.

    A released reservation gives its amount back to the window it was taken from.
    """
    if not reservation_ids:
        return
    # One UPDATE settles them all; only released ones give their amounts back.
    params = {"ids": reservation_ids, "state": "consumed" if consumed else "released", "at": utcnow()}
    if consumed:  # nothing to give back, and nothing in the transaction reads it again
        consume = statements.prebuilt(("budget-consume",), _consume_statement)
        for reservation_id in reservation_ids:
            uow.write_later(consume, {"reservation_id": reservation_id, "at": params["at"]})
        return
    settled = statements.run(uow.session, statements.prebuilt(("budget-settle",), _settle_statement), params).all()
    for budget_id, start, amount in settled:
        uow.session.execute(
            update(Budget)
            .where(Budget.id == budget_id, Budget.window_start == start, Budget.used_amount >= amount)
            .values(used_amount=Budget.used_amount - amount)
            .execution_options(synchronize_session=False)
        )
