"""The workflow engine: start runs, run their nodes, wake them on events (SPEC WAIT).

A run moves ``pending → running → waiting ⇄ running → completed|failed``
(`app.domain.case_states.RUN`), each move one conditional UPDATE
(`app.models.moves`), so two dispatchers (an inline wake-up and a sweep) never
both advance a run.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import select

from app.domain import workflow as wf
from app.domain.case_states import RunMove, RunState, StepMove, StepState
from app.domain.clock import utcnow
from app.domain.errors import ActionError
from app.domain.workflow import NodeOutcome
from app.models import (
    StepRun,
    WorkflowDispatchOutbox,
    WorkflowEventInbox,
    WorkflowRun,
    WorkflowVersion,
    move_row,
    take_run,
)
from app.services.uow import Actor, UnitOfWork, unit_of_work

log = logging.getLogger(__name__)

DISPATCH_RETRY_SECONDS = (5, 15, 60, 300, 900)


def write_dispatch(
    uow: UnitOfWork,
    *,
    dispatch_id: str,
    installation_id: str,
    run_id: str,
    operation: str,
    operation_key: str,
    event_inbox_id: str | None = None,
    event: WorkflowEventInbox | None = None,
) -> None:
    """Write an outbox row once and deliver it in this transaction, just before it
    commits (in a savepoint: a failed wake-up is recorded for the sweep, EVT-2).

    A new row is written ``delivered`` at once, as the wake-up will leave it: no one
    sees it before the commit, and the wake-up runs before every commit (a savepoint
    rolled back drops both). A wake-up that fails marks it ``failed`` instead. A row
    that existed is delivered only if it was not yet.

    Args:
        event: the inbox row this transaction wrote for `event_inbox_id` (written
            delivered too: `events.write_event`); None when it existed already.
    """
    now = utcnow()
    fresh = event_inbox_id is None or event is not None
    row = uow.insert_known(
        WorkflowDispatchOutbox,
        dict(
            id=dispatch_id,
            installation_id=installation_id,
            run_id=run_id,
            operation=operation,
            event_inbox_id=event_inbox_id,
            operation_key=operation_key,
            state="delivered" if fresh else "pending",
            attempts=1 if fresh else 0,
            last_error_code=None,
            available_at=now,
            created_at=now,
            updated_at=now,
        ),
    )
    # The wake-up holds the rows this transaction wrote, so it finds them without a read.
    written = row if row is not None and fresh else None
    uow.before_commit(lambda: wake(uow, dispatch_id, written, event))


def create_run(
    uow: UnitOfWork,
    *,
    version: WorkflowVersion,
    report_id: str,
    trigger_key: str,
    decision_id: str | None = None,
    appeal_id: str | None = None,
) -> WorkflowRun | None:
    """Create a run (once per version and trigger) and its ``start`` dispatch.

    Returns:
        The new run, or None when this trigger already started one.
    """
    session = uow.session
    exists = session.scalar(
        select(WorkflowRun.id).where(
            WorkflowRun.workflow_version_id == version.id, WorkflowRun.trigger_key == trigger_key
        )
    )
    if exists:
        return None
    # Milliseconds only: expires_at (ID-3) is derived from it and digested as ISO text.
    tick = utcnow()
    now = tick.replace(microsecond=tick.microsecond // 1000 * 1000)
    run = WorkflowRun(
        installation_id=version.installation_id,
        report_id=report_id,
        workflow_version_id=version.id,
        decision_id=decision_id,
        appeal_id=appeal_id,
        trigger_key=trigger_key,
        state=RunState.PENDING,
        current_node_id=version.graph.get("start"),
        created_at=now,
    )
    session.add(run)
    session.flush()
    uow.audit(
        version.installation_id,
        f"workflow-run-started:{run.id}",
        "workflow.run_started",
        Actor.system(),
        "workflow_run",
        run.id,
        {"workflow_version_id": version.id, "report_id": report_id, "trigger_key": trigger_key},
    )
    write_dispatch(
        uow,
        dispatch_id=f"{run.id}:start",
        installation_id=run.installation_id,
        run_id=run.id,
        operation="start",
        operation_key=f"workflow-start:{run.id}",
    )
    return run


def _step_run(uow: UnitOfWork, run: WorkflowRun, node_id: str) -> StepRun:
    step_id = f"{run.id}:{node_id}:{run.branch_key or 'main'}"
    with uow.session.no_autoflush:  # a lookup by key: the run's pending changes flush once, later
        step = uow.session.get(StepRun, step_id)
    if step is None:
        step = StepRun(
            id=step_id,
            installation_id=run.installation_id,
            run_id=run.id,
            node_id=node_id,
            branch_key=run.branch_key or "main",
            state=StepState.RUNNING,
        )
        uow.session.add(step)
        uow.session.flush()
    return step


def _execute_node(uow: UnitOfWork, run: WorkflowRun, version: WorkflowVersion, step: StepRun) -> NodeOutcome:
    from app.services.lifecycle.prepare import prepare_action

    node = version.graph["nodes"][step.node_id]
    try:
        return prepare_action(
            uow,
            run=run,
            node_id=step.node_id,
            node=node,
            step_run_id=step.id,
            branch_key=run.branch_key or "main",
            authority_mode=version.authority_mode,
            await_recovery=_awaits_recovery(node),
        )
    except ActionError as error:
        return wf.finished("error", error_code=error.code)


def _continue(
    uow: UnitOfWork, run: WorkflowRun, outcome: NodeOutcome | None, version: WorkflowVersion | None = None
) -> None:
    """Run nodes from the current one until the run waits or ends.

    Args:
        outcome: the current node's outcome when it was just resumed; None to
            execute the current node from the start.
    """
    version = version or uow.session.get(WorkflowVersion, run.workflow_version_id)
    graph = version.graph
    for _ in range(wf.MAX_STEPS_PER_RUN):
        step = _step_run(uow, run, run.current_node_id)
        if outcome is None:
            outcome = _execute_node(uow, run, version, step)
        if outcome.waiting:
            move_row(uow.session, step, StepMove.WAIT, values={"output": outcome.as_dict()})
            waiting = {"waiting_event_type": outcome.event_type, "wait_deadline_at": outcome.deadline}
            move_row(uow.session, run, RunMove.WAIT, values={**waiting, "waiting_proposal_id": outcome.proposal_id})
            return
        step_move = StepMove.FAIL if outcome.port == "error" else StepMove.COMPLETE
        finished = {"output": outcome.as_dict(), "port": outcome.port, "error_code": outcome.error_code}
        move_row(uow.session, step, step_move, values=finished)
        following = wf.next_node(graph, run.current_node_id, outcome.port)
        if following is None:
            _finish(uow, run, outcome)
            return
        run.current_node_id = following
        outcome = None
    _finish(uow, run, wf.finished("error", error_code="workflow_step_limit_exceeded"))


def _finish(uow: UnitOfWork, run: WorkflowRun, outcome: NodeOutcome) -> None:
    ended = {"outcome_port": outcome.port, "last_error_code": outcome.error_code, "finished_at": utcnow()}
    no_wait = {"waiting_event_type": None, "wait_deadline_at": None}
    run_move = RunMove.FAIL if outcome.port == "error" else RunMove.COMPLETE
    move_row(uow.session, run, run_move, values={**ended, **no_wait})
    uow.audit(
        run.installation_id,
        f"workflow-run-finished:{run.id}",
        "workflow.run_finished",
        Actor.system(),
        "workflow_run",
        run.id,
        {"state": run.state, "port": outcome.port, "error_code": outcome.error_code},
    )


def _awaits_recovery(node: dict) -> bool:
    """A node may keep waiting through a terminal failure for an operator retry."""
    return bool((node.get("config") or {}).get("await_recovery"))


def _resume(uow: UnitOfWork, run: WorkflowRun, timed_out: bool) -> None:
    from app.services.lifecycle.prepare import complete_workflow_action

    proposal_id = run.waiting_proposal_id
    version = uow.session.get(WorkflowVersion, run.workflow_version_id)
    node = version.graph["nodes"][run.current_node_id]
    run.waiting_event_type = None
    run.wait_deadline_at = None
    outcome = complete_workflow_action(uow, proposal_id, timed_out=timed_out, await_recovery=_awaits_recovery(node))
    _continue(uow, run, outcome, version)


def _deliver_row(uow: UnitOfWork, row: WorkflowDispatchOutbox, event: WorkflowEventInbox | None, counted: bool):
    """Start the row's run or hand the run its event, then mark the row delivered
    (already so when `counted`: written delivered by this transaction)."""
    if row.operation == "start":
        run = take_run(uow.session, row.run_id, RunMove.START)
        if run is not None:
            _continue(uow, run, None)
    else:
        event = event or uow.session.get(WorkflowEventInbox, row.event_inbox_id)
        run = take_run(uow.session, row.run_id, RunMove.RESUME, event_type=event.event_type)
        if run is not None:
            _resume(uow, run, timed_out=False)
        if not counted:
            event.delivered_at = utcnow()
            event.delivery_attempts += 1
            event.last_error_code = None
    if not counted:
        row.state = "delivered"
        row.attempts += 1
        row.last_error_code = None


def _mark_failed(uow: UnitOfWork, row: WorkflowDispatchOutbox, counted: bool) -> None:
    """Record a failed wake-up; the sweep retries it after a backoff (EVT-2).

    Args:
        counted: this attempt is already counted (a row written delivered).
    """
    if not counted:
        row.attempts += 1
    delay = DISPATCH_RETRY_SECONDS[min(row.attempts - 1, len(DISPATCH_RETRY_SECONDS) - 1)]
    row.state = "failed"
    row.last_error_code = "platform_event_send_failed"
    row.available_at = utcnow() + timedelta(seconds=delay)
    if row.event_inbox_id:
        event = uow.session.get(WorkflowEventInbox, row.event_inbox_id)
        if event is not None:
            if not counted:
                event.delivery_attempts += 1
            event.delivered_at = None
            event.last_error_code = "platform_event_send_failed"


def wake(
    uow: UnitOfWork,
    dispatch_id: str,
    written: WorkflowDispatchOutbox | None = None,
    event: WorkflowEventInbox | None = None,
) -> None:
    """Deliver an outbox row inside the caller's transaction, in a savepoint: a
    failure rolls back only the wake-up, which is recorded for the sweep (EVT-2).

    Args:
        written: the row as this transaction wrote it, delivered (`write_dispatch`);
            None to read it and deliver it unless it was delivered.
        event: its inbox row, as this transaction wrote it.
    """
    row = written or uow.session.get(WorkflowDispatchOutbox, dispatch_id)
    if row is None or (written is None and row.state == "delivered"):
        return
    try:
        with uow.savepoint():
            _deliver_row(uow, row, event, counted=written is not None)
    except Exception:
        log.exception("wake-up %s failed; the sweep will retry it", dispatch_id)
        uow.session.refresh(row)
        _mark_failed(uow, row, counted=written is not None)


def dispatch(dispatch_id: str) -> str:
    """Deliver one outbox row on its own (the sweep's retry of a wake-up, EVT-2).

    Safe to call twice at once: the run only moves through guarded updates and the
    outbox row is marked delivered in the same transaction.

    Returns:
        The outbox row's state afterwards: ``delivered``, ``failed`` or ``missing``.
    """
    with unit_of_work() as uow:
        row = uow.session.get(WorkflowDispatchOutbox, dispatch_id)
        if row is None:
            return "missing"
        wake(uow, dispatch_id)
        state = row.state
        uow.commit()
        return state


def time_out_run(run_id: str) -> bool:
    """Resume a run whose wait passed its deadline with a timeout (WAIT-2).

    Returns:
        True when this call moved the run.
    """
    with unit_of_work() as uow:
        run = take_run(uow.session, run_id, RunMove.RESUME, due_by=utcnow())
        if run is None:
            return False
        _resume(uow, run, timed_out=True)
        uow.commit()
        return True
