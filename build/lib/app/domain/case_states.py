"""The state machines of the case objects: report, appeal, appeal decision, appeal
correction, approval task, workflow run, step run and bulk batch (SPEC §2, §4; CORR,
WAIT, BULK).

Each is a `Machine`: an enum of its states and a table of named moves, each from a
set of states to one state, as `app.domain.states` is for the proposal. Services
never write a ``state`` themselves: they name a move, and the guarded UPDATE in
`app.models.moves` takes its from-states and to-state from here, so a concurrent
change of the same row loses cleanly (it changes nothing and is told so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True, eq=False)  # one object per machine: compared and hashed by identity
class Machine:
    """One object's states and moves.

    Attributes:
        name: what audit and errors call the object (``report``).
        states: its StrEnum of states.
        moves: its StrEnum of named moves.
        transitions: move -> (the states it may start from, the state it ends in).
    """

    name: str
    states: type[StrEnum]
    moves: type[StrEnum]
    transitions: Mapping[StrEnum, tuple[frozenset[StrEnum], StrEnum]]

    def sources(self, move: StrEnum) -> frozenset[StrEnum]:
        """States `move` may start from.

        Raises:
            TypeError: `move` is another machine's (moves of equal text are not
                interchangeable: a task's ``complete`` is not a run's).
        """
        return self._row(move)[0]

    def target(self, move: StrEnum) -> StrEnum:
        """State `move` ends in (TypeError as `sources`)."""
        return self._row(move)[1]

    def can(self, move: StrEnum, state: str) -> bool:
        """Whether an object in `state` may take `move` (TypeError as `sources`)."""
        return state in self._row(move)[0]

    def _row(self, move: StrEnum) -> tuple[frozenset[StrEnum], StrEnum]:
        if not isinstance(move, self.moves):
            raise TypeError(f"{move!r} is not a {self.name} move")
        return self.transitions[move]


# -- report (PRE-2: an appealed or closed report takes only appeal corrections) -----


class ReportState(StrEnum):
    OPEN = "open"
    DECIDED = "decided"
    APPEALED = "appealed"
    CLOSED = "closed"


class ReportMove(StrEnum):
    DECIDE = "decide"  # a moderator's decision (again, while no appeal is filed)
    APPEAL = "appeal"  # an appeal against its latest decision is filed
    CLOSE = "close"  # the appeal is upheld, or its corrections are all confirmed (CORR-4)


R = ReportState
REPORT = Machine(
    "report",
    ReportState, ReportMove,
    {
        ReportMove.DECIDE: (frozenset({R.OPEN, R.DECIDED}), R.DECIDED),
        ReportMove.APPEAL: (frozenset({R.DECIDED}), R.APPEALED),
        ReportMove.CLOSE: (frozenset({R.APPEALED}), R.CLOSED),
    },
)


# -- appeal and its decision's completion (CORR-4) ---------------------------------


class AppealState(StrEnum):
    OPEN = "open"
    DECIDED = "decided"


class AppealMove(StrEnum):
    DECIDE = "decide"  # one outcome per appeal


APPEAL = Machine(
    "appeal",
    AppealState, AppealMove,
    {AppealMove.DECIDE: (frozenset({AppealState.OPEN}), AppealState.DECIDED)},
)


class CompletionState(StrEnum):
    """An appeal decision's ``completion_state``: ``modified`` and ``reversed`` wait
    for their corrections; ``upheld`` (or nothing to correct) completes at once."""

    WAITING = "waiting"
    COMPLETED = "completed"


class CompletionMove(StrEnum):
    COMPLETE = "complete"  # every correction confirmed, or none was needed (CORR-4)


APPEAL_DECISION = Machine(
    "appeal_decision",
    CompletionState, CompletionMove,
    {CompletionMove.COMPLETE: (frozenset({CompletionState.WAITING}), CompletionState.COMPLETED)},
)


# -- appeal correction (CORR-1..4) --------------------------------------------------


class CorrectionState(StrEnum):
    PENDING = "pending"  # prepared; a manual one waits for a reviewer's record
    PROPOSED = "proposed"  # automated: its proposal exists
    REJECTED = "rejected"  # its proposal was rejected
    FAILED = "failed"  # not eligible when prepared, or its proposal failed for good
    CONFIRMED = "confirmed"  # applied (automated) or recorded by a reviewer (manual)


class CorrectionMove(StrEnum):
    PROPOSE = "propose"
    PREPARATION_FAILED = "preparation_failed"  # CORR-3 when preparing
    REJECT = "reject"
    RECORD_MANUAL = "record_manual"  # CORR-2, CORR-4
    CONFIRM = "confirm"  # its proposal was applied (CORR-4)
    PROPOSAL_ENDED = "proposal_ended"  # its proposal ended without applying (FOUR-7)
    PROPOSAL_RETRIED = "proposal_retried"  # a retry started a new delivery cycle (FOUR-7)


C = CorrectionState
# still on its way to confirmed: no failure to retry, no rejection (REV-2 marks, CORR-4)
OPEN_CORRECTION_STATES = frozenset({C.PENDING, C.PROPOSED})
CORRECTION = Machine(
    "appeal_correction",
    CorrectionState, CorrectionMove,
    {
        CorrectionMove.PROPOSE: (frozenset({C.PENDING}), C.PROPOSED),
        CorrectionMove.PREPARATION_FAILED: (frozenset({C.PENDING}), C.FAILED),
        CorrectionMove.REJECT: (frozenset({C.PROPOSED}), C.REJECTED),
        CorrectionMove.RECORD_MANUAL: (frozenset({C.PENDING}), C.CONFIRMED),
        CorrectionMove.CONFIRM: (frozenset({C.PROPOSED, C.FAILED}), C.CONFIRMED),
        # a rejected proposal is terminal too: the reconcile records it as failed
        CorrectionMove.PROPOSAL_ENDED: (frozenset({C.PROPOSED, C.REJECTED}), C.FAILED),
        CorrectionMove.PROPOSAL_RETRIED: (frozenset({C.FAILED}), C.PROPOSED),
    },
)


# -- approval task (APPR-5) ---------------------------------------------------------


class TaskState(StrEnum):
    OPEN = "open"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class TaskMove(StrEnum):
    CLAIM = "claim"
    RELEASE = "release"  # by the operator who holds the claim
    COMPLETE = "complete"  # its proposal was decided
    CANCEL = "cancel"  # its proposal ended undecided (expired, cancelled, timed out)


T = TaskState
OPEN_TASK_STATES = frozenset({T.OPEN, T.CLAIMED})
TASK = Machine(
    "human_task",
    TaskState, TaskMove,
    {
        TaskMove.CLAIM: (frozenset({T.OPEN}), T.CLAIMED),
        TaskMove.RELEASE: (frozenset({T.CLAIMED}), T.OPEN),
        TaskMove.COMPLETE: (OPEN_TASK_STATES, T.COMPLETED),
        TaskMove.CANCEL: (OPEN_TASK_STATES, T.CANCELLED),
    },
)


# -- workflow run and step run (WAIT-1, WAIT-2, EVT-2) -------------------------------


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    # set by operators in the database; no move leads there (RTRY-1 refuses them)
    TERMINATED = "terminated"
    CANCELLED = "cancelled"


class RunMove(StrEnum):
    START = "start"  # its start dispatch is delivered
    RESUME = "resume"  # its event arrived, or its wait timed out
    WAIT = "wait"  # a node waits for an event
    COMPLETE = "complete"  # its last node finished on a port other than error
    FAIL = "fail"  # its last node finished on error, or it ran too many steps


RS = RunState
RUN = Machine(
    "workflow_run",
    RunState, RunMove,
    {
        RunMove.START: (frozenset({RS.PENDING}), RS.RUNNING),
        RunMove.RESUME: (frozenset({RS.WAITING}), RS.RUNNING),
        RunMove.WAIT: (frozenset({RS.RUNNING}), RS.WAITING),
        RunMove.COMPLETE: (frozenset({RS.RUNNING}), RS.COMPLETED),
        RunMove.FAIL: (frozenset({RS.RUNNING}), RS.FAILED),
    },
)


class StepState(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"


class StepMove(StrEnum):
    WAIT = "wait"
    COMPLETE = "complete"
    FAIL = "fail"


ST = StepState
# From every state: a resumed node may wait again (first its approval, then its
# delivery, WAIT-1), and a graph may lead back to a node it ran (up to
# MAX_STEPS_PER_RUN), whose step runs again. A step moves only while its run is
# running, and that run's move is the guarded one.
ANY_STEP_STATE = frozenset(StepState)
STEP = Machine(
    "step_run",
    StepState,
    StepMove,
    {
        StepMove.WAIT: (ANY_STEP_STATE, ST.WAITING),
        StepMove.COMPLETE: (ANY_STEP_STATE, ST.COMPLETED),
        StepMove.FAIL: (ANY_STEP_STATE, ST.FAILED),
    },
)


# -- bulk batch (BULK-2..8) ---------------------------------------------------------
class BatchState(StrEnum):
    DRY_RUN = "dry_run"  # a frozen selection with its counts; nothing proposed yet
    SUBMITTED = "submitted"  # one proposal per item, awaiting one approval of the batch
    RUNNING = "running"  # approved: its items are delivered by the ordinary engine
    PAUSED = "paused"  # approved, its waiting items held until resumed
    COMPLETED = "completed"  # every item resolved
    CANCELLED = "cancelled"  # stopped: every item applied, cancelled before sending, or failed
    REJECTED = "rejected"  # a reviewer refused the batch
    EXPIRED = "expired"  # the dry run or the submitted batch was not acted on in time


class BatchMove(StrEnum):
    SUBMIT = "submit"
    APPROVE = "approve"
    REJECT = "reject"
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    COMPLETE = "complete"
    EXPIRE = "expire"


B = BatchState
BATCH = Machine(
    "bulk_batch",
    BatchState,
    BatchMove,
    {
        BatchMove.SUBMIT: (frozenset({B.DRY_RUN}), B.SUBMITTED),
        BatchMove.APPROVE: (frozenset({B.SUBMITTED}), B.RUNNING),
        BatchMove.REJECT: (frozenset({B.SUBMITTED}), B.REJECTED),
        BatchMove.PAUSE: (frozenset({B.RUNNING}), B.PAUSED),
        BatchMove.RESUME: (frozenset({B.PAUSED}), B.RUNNING),
        BatchMove.CANCEL: (frozenset({B.RUNNING, B.PAUSED}), B.CANCELLED),
        BatchMove.COMPLETE: (frozenset({B.RUNNING}), B.COMPLETED),
        BatchMove.EXPIRE: (frozenset({B.DRY_RUN, B.SUBMITTED}), B.EXPIRED),
    },
)

MACHINES = (REPORT, APPEAL, APPEAL_DECISION, CORRECTION, TASK, RUN, STEP, BATCH)


_BY_MOVES = {machine.moves: machine for machine in MACHINES}


def can_move(move: StrEnum, state: str) -> bool:
    """Whether an object in `state` may take `move`, whichever machine `move` is of
    (what a page asks before it offers the move)."""
    return machine_of(move).can(move, state)


def machine_of(move: StrEnum) -> Machine:
    """The machine whose moves `move` is one of.

    Raises:
        KeyError: `move` is no case object's move.
    """
    return _BY_MOVES[type(move)]
