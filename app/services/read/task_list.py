"""The approval tasks page: open and claimed tasks, soonest due first, a page at a
time (keyset on (due_at, id)), with how many wait in all (issue 25: a reviewer reads
50 rows and a count, not every open task at once)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, func, literal, select, tuple_
from sqlalchemy.orm import joinedload

from app.domain.case_states import OPEN_TASK_STATES
from app.domain.proposal.makers import MakerFacts
from app.domain.proposal.offers import claim_offer, release_offer
from app.extensions import db
from app.models import HumanTask, OperatorUser
from app.models.base import UTCDateTime
from app.models.statements import prebuilt
from app.services.lifecycle.maker_lookup import maker_facts
from app.services.read.list_columns import APPROVING, list_row_options
from app.services.read.pagination import decode_cursor, encode_cursor

NO_FACTS = MakerFacts()  # a task whose proposal is gone: nobody is its maker
TASK_PAGE_SIZE = 50
# a task without a due time sorts last on both backends (SQLite puts NULLs first)
NEVER_DUE = datetime(9999, 12, 31, tzinfo=UTC)
DUE = func.coalesce(HumanTask.due_at, literal(NEVER_DUE, UTCDateTime()))


@dataclass(frozen=True)
class TaskPage:
    """One page of the approval tasks list.

    rows: dicts of task, proposal, assignee (name or None), claim and release offers;
    next_cursor: the cursor of the page after this one, None on the last page;
    total: how many open tasks wait in all in the installation.
    """

    rows: list[dict[str, Any]]
    next_cursor: str | None
    total: int


def task_page(operator: OperatorUser, cursor: str | None = None, limit: int | None = None) -> TaskPage:
    """A page of the operator's installation's open and claimed tasks, soonest due
    first, after `cursor` (an opaque keyset cursor from the previous page; a malformed
    one reads as the first page), `limit` rows at most (TASK_PAGE_SIZE by default),
    with the count of all open tasks (FOUR-1 offers per row)."""
    limit = limit or TASK_PAGE_SIZE
    position = decode_cursor(cursor)
    found = {"installation_id": operator.installation_id, "limit": limit + 1}
    if position:
        found.update(due=position[0], after_id=position[1])
    statement = prebuilt(("task-page", bool(position)), lambda: _page_statement(bool(position)))
    tasks = list(db.session.scalars(statement, found).unique().all())
    more = len(tasks) > limit
    tasks = tasks[:limit]
    if position is None and not more:
        total = len(tasks)  # the whole list is on this page: no count needed
    else:
        counted = prebuilt(("task-count",), lambda: select(func.count()).select_from(HumanTask).where(
            *_open_in_installation()))
        total = db.session.scalar(counted, {"installation_id": operator.installation_id})
    last = tasks[-1] if more else None
    return TaskPage(_rows(operator, tasks), encode_cursor(last.due_at or NEVER_DUE, last.id) if last else None, total)


def _open_in_installation():
    return HumanTask.installation_id == bindparam("installation_id"), HumanTask.state.in_(OPEN_TASK_STATES)


def _page_statement(after_cursor: bool):
    """SQL, built once per shape: a page of open tasks soonest due first with their
    proposals and claimants; bound ``installation_id``, ``limit`` and, after a
    cursor, ``due`` and ``after_id``."""
    query = select(HumanTask).where(*_open_in_installation())
    if after_cursor:
        query = query.where(tuple_(DUE, HumanTask.id) > tuple_(bindparam("due", type_=UTCDateTime()),
                                                                bindparam("after_id")))
    return _with_rows(query.order_by(DUE, HumanTask.id).limit(bindparam("limit")))


def open_task(operator: OperatorUser, task_id: str) -> dict[str, Any] | None:
    """One task row (any state) of the operator's installation, or None."""
    query = select(HumanTask).where(HumanTask.installation_id == operator.installation_id, HumanTask.id == task_id)
    rows = _rows(operator, _load(query))
    return rows[0] if rows else None


def _with_rows(query):
    # the proposal and the claimant come with the task (one query; each loaded once)
    return query.options(*list_row_options(joinedload(HumanTask.proposal), keep=APPROVING),
                         joinedload(HumanTask.assignee))


def _load(query) -> list[HumanTask]:
    return list(db.session.scalars(_with_rows(query)).unique().all())


def _rows(operator: OperatorUser, tasks: list[HumanTask]) -> list[dict[str, Any]]:
    facts = maker_facts(db.session, [t.proposal for t in tasks if t.proposal is not None])
    return [
        {
            "task": t,
            "proposal": t.proposal,
            "assignee": t.assignee.display_name if t.assignee else None,
            # FOUR-1: a maker's queue shows the task as not theirs to decide
            "claim": claim_offer(t.state, operator.id, operator.roles, facts.get(t.action_proposal_id, NO_FACTS)),
            "release": release_offer(t.state, t.assigned_operator_id, operator.id),
        }
        for t in tasks
    ]
