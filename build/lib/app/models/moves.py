"""The one guarded move of every case object (`app.domain.case_states`).

A case object's state changes only here: one conditional UPDATE that matches while
the row is in one of the move's from-states (and every extra condition holds), so
of two writers racing for the same row exactly one wins and the other changes
nothing and is told so (compare-and-set, as `move_proposal` does for proposals).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import bindparam, literal, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from app.domain.case_states import (
    APPEAL,
    APPEAL_DECISION,
    BATCH,
    CORRECTION,
    REPORT,
    RUN,
    STEP,
    TASK,
    Machine,
    RunMove,
    machine_of,
)
from app.domain.clock import utcnow

from . import statements
from .bulk import BulkBatch
from .cases import Appeal, AppealCorrection, AppealDecision, Report
from .workflows import HumanTask, StepRun, WorkflowRun

# model -> (its machine, the column that holds its state)
STATE_COLUMNS: dict[type, tuple[Machine, str]] = {
    Report: (REPORT, "state"),
    Appeal: (APPEAL, "state"),
    AppealDecision: (APPEAL_DECISION, "completion_state"),
    AppealCorrection: (CORRECTION, "state"),
    HumanTask: (TASK, "state"),
    WorkflowRun: (RUN, "state"),
    StepRun: (STEP, "state"),
    BulkBatch: (BATCH, "state"),
}


def _machine(model: type, move: StrEnum) -> tuple[Machine, str]:
    machine, column = STATE_COLUMNS[model]
    if machine_of(move) is not machine:
        raise TypeError(f"{move!r} is not a move of {model.__name__}")
    return machine, column


def move_by_id(
    session: Session, model: type, row_id: str, move: StrEnum, *, where: tuple = (), values: dict | None = None
) -> bool:
    """Apply a case object's move with one conditional UPDATE.

    Args:
        session: the unit of work's session (its pending changes flush first).
        model: the case object's model (`Report`, `HumanTask`, ...).
        row_id: the row's id.
        move: one of the model's machine's moves.
        where: extra SQLAlchemy conditions (e.g. who holds a task's claim).
        values: other attributes set in the same UPDATE, by attribute name.

    Returns:
        True when the row moved; False when it was in none of the move's
        from-states or an extra condition failed (nothing was written).

    Raises:
        TypeError: `move` is not a move of `model`, or `values` names the state
            column (the table says where a move ends, not the caller).
    """
    machine, column = _machine(model, move)
    if column in (values or {}):
        raise TypeError(f"{move!r} writes {column} from its table; values may not name it")
    states = [state.value for state in machine.sources(move)]
    written = {column: machine.target(move).value, **(values or {})}
    statement = (
        update(model)
        .where(model.id == row_id, getattr(model, column).in_(states), *where)
        .values({getattr(model, name): value for name, value in written.items()})
        .execution_options(synchronize_session=False)
    )
    return session.execute(statement).rowcount == 1


def move_many(session: Session, model: type, row_ids: list[str], move: StrEnum, *, values: dict | None = None) -> set[str]:
    """`move_by_id` of many rows at once (a bulk batch's reports, BULK-9): one
    conditional UPDATE per 500 ids, RETURNING the ids that moved.

    Returns:
        The ids that moved; the others were in none of the move's from-states.
    """
    machine, column = _machine(model, move)
    if column in (values or {}):
        raise TypeError(f"{move!r} writes {column} from its table; values may not name it")
    states = [state.value for state in machine.sources(move)]
    written = {column: machine.target(move).value, "updated_at": utcnow(), **(values or {})}
    moved: set[str] = set()
    for start in range(0, len(row_ids), 500):
        statement = (
            update(model)
            .where(model.id.in_(row_ids[start : start + 500]), getattr(model, column).in_(states))
            .values({getattr(model, name): value for name, value in written.items()})
            .returning(model.id)
            .execution_options(synchronize_session=False)
        )
        moved.update(session.scalars(statement))
    return moved


def move_row(session: Session, row: Any, move: StrEnum, *, where: tuple = (), values: dict | None = None) -> bool:
    """`move_by_id` for a row loaded in `session`, kept as written.

    When the row moved, the loaded object holds the new state, `values` and
    ``updated_at`` without a read; when it did not (another writer won, or the
    state allows no such move), the object is read again.

    Returns:
        True when the row moved.
    """
    model = type(row)
    machine, column = _machine(model, move)
    # updated_at set here (not by onupdate) so that the loaded row knows its value
    written = {"updated_at": utcnow(), **(values or {})}
    if not move_by_id(session, model, row.id, move, where=where, values=written):
        session.refresh(row)
        return False
    for name, value in {column: machine.target(move).value, **written}.items():
        set_committed_value(row, name, value)
    return True


def take_run(
    session: Session, run_id: str, run_move: RunMove, *, event_type: str | None = None, due_by: datetime | None = None
) -> WorkflowRun | None:
    """Start or resume a run (`RunMove.START`, `RunMove.RESUME`): its guarded move to
    ``running``, which also gives the row as written (WAIT-1, WAIT-2, EVT-2).

    Each shape of the statement is built once: runs are taken on the delivery's
    hot path.

    Args:
        event_type: only while the run waits for this event.
        due_by: only while the run's wait deadline is at or before this instant.

    Returns:
        The run, or None when it was not in the move's from-state (someone else
        took it, or its wait does not match).
    """
    if run_move not in (RunMove.START, RunMove.RESUME):
        raise ValueError(f"{run_move!r} does not take a run")
    shape = (run_move, event_type is not None, due_by is not None)
    params = {"run_id": run_id, "now": utcnow(), "event_type": event_type, "due_by": due_by}
    params = {k: v for k, v in params.items() if v is not None}
    loaded = session.identity_map.get(identity_key(WorkflowRun, run_id))
    if loaded is not None and loaded not in session.dirty:
        # Read earlier in this transaction (a batch's outcomes): guarded on the row as
        # read, so no read again and no flush of other rows' changes (they go together).
        statement = statements.prebuilt(("take-loaded-run", *shape), lambda: _take_statement(*shape, loaded=True))
        with session.no_autoflush:  # it writes only this run's row, which has no pending change
            taken = session.execute(statement, {**params, "read_updated_at": loaded.updated_at}).rowcount == 1
        if taken:
            set_committed_value(loaded, "state", RUN.target(run_move).value)
            set_committed_value(loaded, "updated_at", params["now"])
            return loaded
    statement = statements.prebuilt(("take-run", *shape), lambda: _take_statement(*shape))
    return session.scalar(statement, params)


def _take_statement(run_move: RunMove, by_event: bool, by_deadline: bool, loaded: bool = False):
    R = WorkflowRun.__table__.c if loaded else WorkflowRun
    states = [literal(state.value) for state in RUN.sources(run_move)]
    where = [R.id == bindparam("run_id"), R.state.in_(states)]
    if by_event:
        where.append(R.waiting_event_type == bindparam("event_type"))
    if by_deadline:
        where.append(R.wait_deadline_at <= bindparam("due_by", type_=R.wait_deadline_at.type))
    written = {"state": RUN.target(run_move).value, "updated_at": bindparam("now", type_=R.updated_at.type)}
    if loaded:  # unchanged since it was read (every write of a run sets updated_at)
        where.append(R.updated_at == bindparam("read_updated_at", type_=R.updated_at.type))
        return update(WorkflowRun.__table__).where(*where).values(written)
    return (
        update(WorkflowRun)
        .where(*where)
        .values(written)
        .returning(WorkflowRun)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
