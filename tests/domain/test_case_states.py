"""The case objects' state machines against their diagrams, move by move (PRE-2,
CORR-4, APPR-5, WAIT-1).

Each diagram is written out here independently of `app.domain.case_states`; the
guarded UPDATE that applies a move is tested on the database in
`tests/models/test_case_moves.py`.
"""

from __future__ import annotations

import itertools

import pytest

from app.domain import case_states as cs

Rp, Ap, Cp, Co = cs.ReportState, cs.AppealState, cs.CompletionState, cs.CorrectionState
Tk, Rn, St, Bt = cs.TaskState, cs.RunState, cs.StepState, cs.BatchState

# machine -> {move: (from-states, to-state)}
DIAGRAMS = {
    cs.REPORT: {
        cs.ReportMove.DECIDE: ({Rp.OPEN, Rp.DECIDED}, Rp.DECIDED),  # a decision, or a newer one before any appeal
        cs.ReportMove.APPEAL: ({Rp.DECIDED}, Rp.APPEALED),  # one open appeal at a time
        cs.ReportMove.CLOSE: ({Rp.APPEALED}, Rp.CLOSED),  # upheld, or every correction confirmed
    },
    cs.APPEAL: {cs.AppealMove.DECIDE: ({Ap.OPEN}, Ap.DECIDED)},
    cs.APPEAL_DECISION: {cs.CompletionMove.COMPLETE: ({Cp.WAITING}, Cp.COMPLETED)},
    cs.CORRECTION: {
        cs.CorrectionMove.PROPOSE: ({Co.PENDING}, Co.PROPOSED),
        cs.CorrectionMove.PREPARATION_FAILED: ({Co.PENDING}, Co.FAILED),
        cs.CorrectionMove.REJECT: ({Co.PROPOSED}, Co.REJECTED),
        cs.CorrectionMove.RECORD_MANUAL: ({Co.PENDING}, Co.CONFIRMED),
        cs.CorrectionMove.CONFIRM: ({Co.PROPOSED, Co.FAILED}, Co.CONFIRMED),
        cs.CorrectionMove.PROPOSAL_ENDED: ({Co.PROPOSED, Co.REJECTED}, Co.FAILED),
        cs.CorrectionMove.PROPOSAL_RETRIED: ({Co.FAILED}, Co.PROPOSED),
    },
    cs.TASK: {
        cs.TaskMove.CLAIM: ({Tk.OPEN}, Tk.CLAIMED),
        cs.TaskMove.RELEASE: ({Tk.CLAIMED}, Tk.OPEN),
        cs.TaskMove.COMPLETE: ({Tk.OPEN, Tk.CLAIMED}, Tk.COMPLETED),
        cs.TaskMove.CANCEL: ({Tk.OPEN, Tk.CLAIMED}, Tk.CANCELLED),
    },
    cs.RUN: {
        cs.RunMove.START: ({Rn.PENDING}, Rn.RUNNING),
        cs.RunMove.RESUME: ({Rn.WAITING}, Rn.RUNNING),
        cs.RunMove.WAIT: ({Rn.RUNNING}, Rn.WAITING),
        cs.RunMove.COMPLETE: ({Rn.RUNNING}, Rn.COMPLETED),
        cs.RunMove.FAIL: ({Rn.RUNNING}, Rn.FAILED),
    },
    cs.STEP: {
        cs.StepMove.WAIT: (set(cs.StepState), St.WAITING),  # waits again, or a graph leads back to it
        cs.StepMove.COMPLETE: (set(cs.StepState), St.COMPLETED),
        cs.StepMove.FAIL: (set(cs.StepState), St.FAILED),
    },
    cs.BATCH: {
        cs.BatchMove.SUBMIT: ({Bt.DRY_RUN}, Bt.SUBMITTED),  # one proposal per item
        cs.BatchMove.APPROVE: ({Bt.SUBMITTED}, Bt.RUNNING),  # one approval by its digest
        cs.BatchMove.REJECT: ({Bt.SUBMITTED}, Bt.REJECTED),
        cs.BatchMove.PAUSE: ({Bt.RUNNING}, Bt.PAUSED),
        cs.BatchMove.RESUME: ({Bt.PAUSED}, Bt.RUNNING),
        cs.BatchMove.CANCEL: ({Bt.RUNNING, Bt.PAUSED}, Bt.CANCELLED),
        cs.BatchMove.COMPLETE: ({Bt.RUNNING}, Bt.COMPLETED),  # every item resolved
        cs.BatchMove.EXPIRE: ({Bt.DRY_RUN, Bt.SUBMITTED}, Bt.EXPIRED),  # not acted on in time
    },
}

STATE_VALUES = {
    cs.REPORT: ["open", "decided", "appealed", "closed"],
    cs.APPEAL: ["open", "decided"],
    cs.APPEAL_DECISION: ["waiting", "completed"],
    cs.CORRECTION: ["pending", "proposed", "rejected", "failed", "confirmed"],
    cs.TASK: ["open", "claimed", "completed", "cancelled"],
    cs.RUN: ["pending", "running", "waiting", "completed", "failed", "terminated", "cancelled"],
    cs.STEP: ["running", "waiting", "completed", "failed"],
    cs.BATCH: ["dry_run", "submitted", "running", "paused", "completed", "cancelled", "rejected", "expired"],
}

CASES = [
    pytest.param(machine, move, state, id=f"{machine.name}-{move.value}-{state.value}")
    for machine, diagram in DIAGRAMS.items()
    for move, state in itertools.product(diagram, machine.states)
]


def test_every_machine_has_a_diagram():
    assert set(DIAGRAMS) == set(cs.MACHINES)
    assert [m.name for m in cs.MACHINES] == [
        "report",
        "appeal",
        "appeal_decision",
        "appeal_correction",
        "human_task",
        "workflow_run",
        "step_run",
        "bulk_batch",
    ]


@pytest.mark.parametrize("machine", cs.MACHINES, ids=lambda m: m.name)
def test_the_table_is_the_diagram(machine):
    """Every move's from-states and to-state, and no other move."""
    diagram = DIAGRAMS[machine]
    assert set(machine.transitions) == set(diagram) == set(machine.moves)
    for move, (sources, target) in diagram.items():
        assert machine.transitions[move] == (frozenset(sources), target)
        assert machine.sources(move) == frozenset(sources)
        assert machine.target(move) is target
    assert [s.value for s in machine.states] == STATE_VALUES[machine]


@pytest.mark.parametrize(("machine", "move", "state"), CASES)
def test_can_answers_the_diagram_for_every_state(machine, move, state):
    allowed = state in DIAGRAMS[machine][move][0]
    assert machine.can(move, state) is allowed
    assert machine.can(move, state.value) is allowed  # as read from a row
    assert cs.can_move(move, state.value) is allowed  # what a page asks, not naming the machine


@pytest.mark.parametrize("machine", cs.MACHINES, ids=lambda m: m.name)
def test_a_move_names_its_machine(machine):
    for move in machine.moves:
        assert cs.machine_of(move) is machine


def test_a_move_of_another_machine_is_refused_even_with_the_same_text():
    """A task's ``complete`` is not a run's: equal StrEnum text does not make a move
    of another machine."""
    assert cs.TaskMove.COMPLETE == cs.RunMove.COMPLETE == "complete"
    for call in (cs.RUN.sources, cs.RUN.target):
        with pytest.raises(TypeError, match="is not a workflow_run move"):
            call(cs.TaskMove.COMPLETE)
    with pytest.raises(TypeError, match="not a human_task move"):
        cs.TASK.can(cs.RunMove.COMPLETE, "open")
    with pytest.raises(TypeError):
        cs.TASK.can("complete", "open")
    with pytest.raises(KeyError):
        cs.machine_of("complete")


def test_open_tasks_are_the_ones_a_decision_can_finish():
    """APPR-5: a decided proposal completes its task only while it is open or claimed."""
    assert cs.OPEN_TASK_STATES == {Tk.OPEN, Tk.CLAIMED}
    assert cs.TASK.sources(cs.TaskMove.COMPLETE) == cs.TASK.sources(cs.TaskMove.CANCEL) == cs.OPEN_TASK_STATES


def test_terminal_states_have_no_way_out():
    """A closed report, a decided appeal, a completed appeal decision, a confirmed
    correction, a finished task and a finished run take no move."""
    ended = {
        cs.REPORT: {Rp.CLOSED},
        cs.APPEAL: {Ap.DECIDED},
        cs.APPEAL_DECISION: {Cp.COMPLETED},
        cs.CORRECTION: {Co.CONFIRMED},
        cs.TASK: {Tk.COMPLETED, Tk.CANCELLED},
        cs.RUN: {Rn.COMPLETED, Rn.FAILED, Rn.TERMINATED, Rn.CANCELLED},
    }
    for machine, states in ended.items():
        for move, state in itertools.product(machine.moves, states):
            assert not machine.can(move, state), (machine.name, move, state)
