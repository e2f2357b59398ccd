"""Every case object's guarded move, table-driven, on the backend the run uses
(PRE-2, CORR-4, APPR-5, WAIT-1, EVT-2).

For each machine, every move from every state: an allowed move lands the row in
its target (and the loaded object with it); a refused one answers False and
changes no column of the row. The table itself is `tests/domain/test_case_states.py`.
"""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import select, update

from app.domain.case_states import RUN, ReportMove, RunMove, TaskMove, TaskState
from app.extensions import db
from app.models import (
    Appeal,
    AppealCorrection,
    AppealDecision,
    BulkBatch,
    Decision,
    HumanTask,
    Report,
    StepRun,
    WorkflowRun,
    move_by_id,
    move_row,
    take_run,
)
from app.models.moves import STATE_COLUMNS

from ..builders import decide_report

MODELS = [Report, Appeal, AppealDecision, AppealCorrection, HumanTask, WorkflowRun, StepRun, BulkBatch]


def case_rows(world) -> dict[type, str]:
    """One row of every case object, around one decided report (ids by model)."""
    proposal = decide_report(world)
    decision_id = db.session.scalar(select(Decision.id).where(Decision.report_id == proposal.report_id))
    common = {"installation_id": world.installation_id}
    appeal = Appeal(**common, report_id=proposal.report_id, decision_id=decision_id, statement="test")
    db.session.add(appeal)
    db.session.flush()
    ad = AppealDecision(**common, appeal_id=appeal.id, outcome="reversed", maker_id=world.users["reviewer"])
    db.session.add(ad)
    db.session.flush()
    correction = AppealCorrection(
        **common,
        appeal_id=appeal.id,
        appeal_decision_id=ad.id,
        report_id=proposal.report_id,
        integration_id=world.integration_id,
        original_proposal_id=proposal.id,
        original_operation_id=proposal.operation_id,
        original_target=proposal.target,
        original_payload_digest=proposal.payload_digest,
        mode="automated",
    )
    db.session.add(correction)
    batch = BulkBatch(
        **common,
        public_reference="B-CASEROWS",
        selection={"source": "list", "text": "post:1"},
        component_version_id=proposal.component_version_id,
        action_code=proposal.action_code,
        decision_code="remove_content",
        maker_id=world.users["moderator"],
        dry_run_digest="sha256:test",
        expires_at=proposal.expires_at,
    )
    db.session.add(batch)
    db.session.commit()
    return {
        BulkBatch: batch.id,
        Report: proposal.report_id,
        Appeal: appeal.id,
        AppealDecision: ad.id,
        AppealCorrection: correction.id,
        HumanTask: db.session.scalar(select(HumanTask.id).where(HumanTask.action_proposal_id == proposal.id)),
        WorkflowRun: proposal.run_id,
        StepRun: proposal.step_run_id,
    }


def put(model, row_id: str, state: str) -> None:
    """Set a row's state behind the session's back, as a concurrent writer would."""
    _, column = STATE_COLUMNS[model]
    db.session.execute(update(model.__table__).where(model.__table__.c.id == row_id).values({column: state}))
    db.session.commit()


def stored(model, row_id: str) -> dict:
    return dict(db.session.execute(select(model.__table__).where(model.__table__.c.id == row_id)).mappings().one())


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_move_from_every_state(app, world, model):
    """Allowed: the row and its loaded object are in the target. Refused: False, and
    not one column of the row changed."""
    row_id = case_rows(world)[model]
    machine, column = STATE_COLUMNS[model]
    for move, state in itertools.product(machine.moves, machine.states):
        put(model, row_id, state.value)
        row = db.session.get(model, row_id)
        before = stored(model, row_id)
        moved = move_row(db.session, row, move)
        db.session.commit()
        after = stored(model, row_id)
        case = (move.value, state.value)
        if machine.can(move, state):
            assert moved, case
            assert after[column] == getattr(row, column) == machine.target(move).value, case
            assert after["updated_at"] == row.updated_at >= before["updated_at"], case
            assert {k: v for k, v in after.items() if k not in (column, "updated_at")} == {
                k: v for k, v in before.items() if k not in (column, "updated_at")
            }, case
        else:
            assert not moved, case
            assert after == before, case
            assert getattr(row, column) == state.value, case


@pytest.mark.parametrize("run_move", [RunMove.START, RunMove.RESUME])
@pytest.mark.parametrize("loaded", [False, True], ids=["by-id", "loaded"])
def test_a_run_is_taken_only_from_its_move_s_state(app, world, run_move, loaded):
    """WAIT-1, EVT-2: a dispatcher starts a pending run or resumes a waiting one; from
    any other state it gets nothing and the row is unchanged."""
    run_id = case_rows(world)[WorkflowRun]
    for state in RUN.states:
        put(WorkflowRun, run_id, state.value)
        db.session.expunge_all()
        if loaded:
            db.session.get(WorkflowRun, run_id)
        before = stored(WorkflowRun, run_id)
        taken = take_run(db.session, run_id, run_move)
        db.session.commit()
        after = stored(WorkflowRun, run_id)
        if RUN.can(run_move, state):
            assert taken is not None and taken.state == after["state"] == "running", state
        else:
            assert taken is None and after == before, state
    with pytest.raises(ValueError):
        take_run(db.session, run_id, RunMove.WAIT)


def test_a_stale_writer_loses_cleanly(app, world):
    """APPR-5: two reviewers claim the same open task; the one whose copy is stale
    gets False, writes nothing, and sees the winner's claim."""
    task_id = case_rows(world)[HumanTask]
    task = db.session.get(HumanTask, task_id)
    assert task.state == TaskState.OPEN
    winner, loser = world.users["reviewer"], world.users["reviewer2"]
    assert move_by_id(db.session, HumanTask, task_id, TaskMove.CLAIM, values={"assigned_operator_id": winner})
    before = stored(HumanTask, task_id)
    assert task.state == TaskState.OPEN  # the loser's copy, read before the winner wrote
    assert not move_row(db.session, task, TaskMove.CLAIM, values={"assigned_operator_id": loser})
    assert stored(HumanTask, task_id) == before
    assert (task.state, task.assigned_operator_id) == (TaskState.CLAIMED, winner)


def test_an_extra_condition_guards_the_move_too(app, world):
    """APPR-5: only the operator holding a claim releases it."""
    task_id = case_rows(world)[HumanTask]
    holder, other = world.users["reviewer"], world.users["reviewer2"]
    assert move_by_id(db.session, HumanTask, task_id, TaskMove.CLAIM, values={"assigned_operator_id": holder})
    task = db.session.get(HumanTask, task_id)
    assert not move_row(db.session, task, TaskMove.RELEASE, where=(HumanTask.assigned_operator_id == other,))
    assert task.state == TaskState.CLAIMED
    assert move_row(db.session, task, TaskMove.RELEASE, where=(HumanTask.assigned_operator_id == holder,))
    assert task.state == TaskState.OPEN


def test_a_move_of_another_object_is_refused_before_any_write(app, world):
    rows = case_rows(world)
    report = db.session.get(Report, rows[Report])
    with pytest.raises(TypeError, match="not a move of Report"):
        move_row(db.session, report, TaskMove.CLAIM)
    with pytest.raises(TypeError):
        move_by_id(db.session, HumanTask, rows[HumanTask], RunMove.COMPLETE)


def test_a_move_may_not_be_told_another_end_state(app, world):
    """The table says where a move ends: `values` naming the state column is refused
    before any write (a decide that would write ``closed`` writes nothing)."""
    rows = case_rows(world)
    before = stored(Report, rows[Report])
    report = db.session.get(Report, rows[Report])
    with pytest.raises(TypeError, match="values may not name it"):
        move_row(db.session, report, ReportMove.DECIDE, values={"state": "closed"})
    assert stored(Report, rows[Report]) == before
