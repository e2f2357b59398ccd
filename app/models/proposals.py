"""Action proposals, their approvals and receipts (SPEC §3).

`ActionProposal` rows change state only through `move_proposal`, which builds one
conditional UPDATE from the state machine in `app.domain.states`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    false,
    literal,
    text,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column
from sqlalchemy.orm.attributes import set_committed_value

from app.domain.clock import utcnow
from app.domain.receipts import ProposalIdentity
from app.domain.states import (
    MAX_ATTEMPTS_PER_CYCLE,
    WAITING_STATES,
    Move,
    ProposalState,
    attempts_in_cycle,
    is_terminal,
    sources,
    target,
)

from . import statements
from .base import Base, UTCDateTime, created_at_column, id_column, json_column, related, updated_at_column

if TYPE_CHECKING:
    from .attempts import ConnectionAttempt
    from .cases import Decision, Report
    from .workflows import HumanTask, WorkflowRun


# The rows of `ix_action_proposals_waiting` (the domain's waiting states, in the table's
# order). A query meets the partial index only when its WHERE names these states as
# literals (`predicates.in_waiting_states`), not as bound parameters.
WAITING_PREDICATE = "state IN (" + ", ".join(f"'{s.value}'" for s in ProposalState if s in WAITING_STATES) + ")"


class ActionProposal(Base):
    """An immutable proposal to act on a platform, with its delivery bookkeeping."""

    __tablename__ = "action_proposals"
    __table_args__ = (
        # proposals list: newest first, keyset (created_at, id), optionally by state
        Index("ix_action_proposals_list", "installation_id", "created_at", "id"),
        Index("ix_action_proposals_state_list", "installation_id", "state", "created_at", "id"),
        # delivery sweep: due deliveries and expired leases (DLV-1, EVT-3)
        Index("ix_action_proposals_due", "delivery_terminal", "state", "next_attempt_at"),
        Index("ix_action_proposals_lease", "state", "lease_expires_at"),
        # a bulk batch's ledger: its items counted by state (BULK-6)
        Index("ix_action_proposals_bulk", "bulk_batch_id", "state"),
        # "an action of this code on this subject" (BULK-2: already applied, under way)
        Index("ix_action_proposals_subject", "installation_id", "target_reference", "action_code"),
        # a batch claim's companions (DLV-1): the waiting proposals of one component
        # version, oldest due first, read in order so LIMIT stops the scan (without it
        # every batch sorted all due rows). Partial: a row leaves it once claimed.
        Index(
            "ix_action_proposals_waiting",
            "component_version_id",
            "next_attempt_at",
            "id",
            postgresql_where=text(WAITING_PREDICATE),
            sqlite_where=text(WAITING_PREDICATE),
        ),
    )

    id: Mapped[str] = mapped_column(String(700), primary_key=True)  # {step_run_id}:proposal
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("workflow_runs.id"), index=True)
    step_run_id: Mapped[str] = mapped_column(String(600))
    appeal_id: Mapped[str | None] = mapped_column(ForeignKey("appeals.id"), nullable=True)
    decision_id: Mapped[str | None] = mapped_column(ForeignKey("decisions.id"), nullable=True)
    action_code: Mapped[str] = mapped_column(String(200))
    target: Mapped[dict[str, Any]] = json_column("target_json")
    target_reference: Mapped[str | None] = mapped_column(String(500), nullable=True)  # target's reference
    payload: Mapped[dict[str, Any]] = json_column("payload_json")
    preconditions: Mapped[dict[str, Any]] = json_column("preconditions_json")
    payload_digest: Mapped[str] = mapped_column(String(100))
    component_version_id: Mapped[str] = mapped_column(ForeignKey("component_versions.id"))
    workflow_version_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    policy_version_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    authority_mode: Mapped[str] = mapped_column(String(20))
    approval_mode: Mapped[str] = mapped_column(String(20))  # human, bounded_auto
    approval_policy: Mapped[dict[str, Any]] = json_column("approval_policy_json")  # {mode, expires_at, ...}
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(30))
    operation_id: Mapped[str] = mapped_column(String(700), unique=True)
    compensates_proposal_id: Mapped[str | None] = mapped_column(ForeignKey("action_proposals.id"), nullable=True)
    # TEMP-1..4: not sent before `not_before`; a temporary action's duration and planned
    # reversal ({duration_seconds, reversal: {component_version_id, action_code, target,
    # payload}}); a reversal names the temporary action it reverses.
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    temporary: Mapped[dict[str, Any] | None] = json_column("temporary_json", nullable=True)
    # FOUR-5: where the approved action goes and how its answer is read, as its digest
    # covers it (`app.domain.proposal.destination.describe`); None for older proposals.
    delivery: Mapped[dict[str, Any] | None] = json_column("delivery_json", nullable=True)
    reverses_proposal_id: Mapped[str | None] = mapped_column(
        ForeignKey("action_proposals.id"), nullable=True, index=True
    )
    # BULK-3: the batch whose one approval authorizes it (its ledger counts it, BULK-6)
    bulk_batch_id: Mapped[str | None] = mapped_column(ForeignKey("bulk_batches.id"), nullable=True)
    # POL-3: the approval policies that applied when it was prepared (`route_record`); None: the default
    approval_route: Mapped[dict[str, Any] | None] = json_column("approval_route_json", nullable=True)
    emergency: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())  # POL-6
    created_by_type: Mapped[str] = mapped_column(String(30))  # system, operator
    created_by_id: Mapped[str] = mapped_column(String(200))
    delivery_attempt_count: Mapped[int] = mapped_column(default=0)
    delivery_cycle: Mapped[int] = mapped_column(default=1)
    cycle_start_attempt: Mapped[int] = mapped_column(default=0)
    delivery_terminal: Mapped[bool] = mapped_column(Boolean, default=False)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    accepted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    confirmation_deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_receipt: Mapped[dict[str, Any] | None] = json_column("last_receipt_json", nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    report: Mapped[Report] = related()
    run: Mapped[WorkflowRun] = related()
    decision: Mapped[Decision | None] = related()  # the decision it enforces, when pinned
    approval: Mapped[ActionApproval | None] = related(uselist=False)
    task: Mapped[HumanTask | None] = related(uselist=False)  # its approval task
    attempts: Mapped[list[ConnectionAttempt]] = related(
        order_by="(ConnectionAttempt.delivery_cycle, ConnectionAttempt.attempt_number, ConnectionAttempt.started_at)"
    )
    receipts: Mapped[list[ActionReceiptRecord]] = related(
        order_by="(ActionReceiptRecord.received_at, ActionReceiptRecord.id)"
    )

    @property
    def identity(self) -> ProposalIdentity:
        return ProposalIdentity(self.id, self.operation_id, self.payload_digest)

    @property
    def attempts_in_cycle(self) -> int:
        return attempts_in_cycle(self.delivery_attempt_count, self.cycle_start_attempt)

    @property
    def attempts_left_in_cycle(self) -> int:
        return max(0, MAX_ATTEMPTS_PER_CYCLE - self.attempts_in_cycle)

    @property
    def is_terminal(self) -> bool:
        return is_terminal(self.state, self.delivery_terminal)

    @property
    def is_correction(self) -> bool:
        return self.appeal_id is not None

    @property
    def is_reversal(self) -> bool:
        return self.reverses_proposal_id is not None

    @property
    def is_notice(self) -> bool:
        """A restriction's notice to the affected user (DSA-4), made by the system for
        the restriction (SQL twin: `predicates.notice`)."""
        from app.domain.proposal.notice_action import NOTICE_CREATOR_PREFIX

        return self.created_by_type == "system" and (self.created_by_id or "").startswith(NOTICE_CREATOR_PREFIX)


def move_batch_items(
    session: Session,
    batch_id: str,
    move: Move,
    *,
    ids: list[str] | None = None,
    values: dict[str, Any] | None = None,
    where: tuple = (),
    then: Move | None = None,
) -> int:
    """Apply a move to a bulk batch's items at once (BULK-3, BULK-4, BULK-7): one
    conditional UPDATE (per 500 ids when `ids` names some), guarded on the move's
    from-states as `move_proposal` is.

    Args:
        batch_id: the batch (`ActionProposal.bulk_batch_id`).
        ids: only these proposals of the batch; None for all in the from-states.
        values: other columns to set.
        where: extra SQLAlchemy conditions every moved row must also meet (a
            pause holds only waiting items, a cancel fails only items sent before).
        then: a second move made in the same UPDATE, from the first's target state
            (approve, then enqueue: one write of the rows instead of two).

    Returns:
        How many moved.

    Raises:
        ValueError: `then` does not start where `move` ends (a programming error).
    """
    table = ActionProposal
    end = target(move)
    if then is not None:
        if end not in sources(then):
            raise ValueError(f"{then.value} does not start from {end.value}")
        end = target(then)
    written = {"state": end.value, "updated_at": utcnow(), **(values or {})}
    guard = (table.bulk_batch_id == batch_id, table.state.in_([s.value for s in sources(move)]), *where)
    chunks = [None] if ids is None else [ids[i : i + 500] for i in range(0, len(ids), 500)]
    moved = 0
    for chunk in chunks:
        where = guard if chunk is None else (*guard, table.id.in_(chunk))
        statement = update(table).where(*where).values(**written).execution_options(synchronize_session=False)
        moved += session.execute(statement).rowcount
    return moved


def move_proposal(
    session: Session,
    proposal_id: str,
    move: Move,
    *,
    where: tuple = (),
    values: dict[str, Any] | None = None,
    expect: dict[str, Any] | None = None,
) -> bool:
    """Apply a state-machine move with one conditional UPDATE.

    The UPDATE only matches while the proposal is in one of the move's source
    states and every extra `where` clause holds, so a stale writer changes nothing.

    Args:
        session: the unit of work's session.
        proposal_id: the proposal to move.
        move: the transition (its from- and to-states come from the state table).
        where: extra SQLAlchemy conditions (attempt, cycle and lease guards).
        values: other columns to set in the same UPDATE.
        expect: instead of `where`, the columns that must still hold these values
            (None as IS NULL; a domain `Change.expect`): the UPDATE is then built
            once per shape and run with parameters (the delivery's hot path).

    Returns:
        True when the row moved, False when the guard did not match.
    """
    if expect is not None and not where:
        return _move_prebuilt(session, proposal_id, move, expect, values or {})
    table = ActionProposal
    statement = (
        update(table)
        .where(table.id == proposal_id, table.state.in_([s.value for s in sources(move)]), *where)
        .values(**{"state": target(move).value, **(values or {})})
        .execution_options(synchronize_session=False)
    )
    return session.execute(statement).rowcount == 1


def _move_prebuilt(session: Session, proposal_id: str, move: Move, expect: dict, values: dict) -> bool:
    statement, params = prebuilt_move(proposal_id, move, expect, values)
    return statements.run(session, statement, params).rowcount == 1


def prebuilt_move(proposal_id: str, move: Move, expect: dict, values: dict) -> tuple[Any, dict[str, Any]]:
    """The prebuilt guarded UPDATE of a move and its parameters, to run now or later
    (`UnitOfWork.write_later`): the move's source states and `expect` (None as IS
    NULL) guard it; it sets the target state and `values`."""
    states = tuple(s.value for s in sources(move))
    written = {"state": target(move).value, **values}
    statement = statements.guarded_update(
        ActionProposal,
        "id",
        statements.guard_shape(expect),
        tuple(sorted(written)),
        # one bound value per source state: an expanding IN cannot run as an executemany
        extra=(("from", states), lambda mapped: [mapped["state"].in_([literal(s) for s in states])]),
    )
    return statement, statements.guarded_update_params("id", proposal_id, expect, written)


def move_loaded(
    session: Session,
    proposal: ActionProposal,
    move: Move,
    *,
    where: tuple = (),
    values: dict | None = None,
    expect: dict | None = None,
) -> bool:
    """`move_proposal` for a row loaded in this session, kept as written: the UPDATE
    matched the row as read, so the row is now that plus the change, and the
    transaction goes on without reading it again. When the guard missed, another
    writer won and the row is read again.

    Returns:
        True when the row moved.
    """
    # updated_at named, not left to onupdate: the loaded row is kept as written, unread
    written = {"state": target(move).value, "updated_at": utcnow(), **(values or {})}
    if not move_proposal(session, proposal.id, move, where=where, values=written, expect=expect):
        session.refresh(proposal)
        return False
    for column, value in written.items():
        set_committed_value(proposal, column, value)
    return True


class ActionApproval(Base):
    """The one decision (approve or reject) ever recorded on a proposal (APPR-3)."""

    __tablename__ = "action_approvals"
    __table_args__ = (UniqueConstraint("approver_id", "idempotency_key"),)

    id: Mapped[str] = id_column("apv")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"), unique=True)
    task_id: Mapped[str | None] = mapped_column(String(700), nullable=True)
    approver_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    payload_digest: Mapped[str] = mapped_column(String(100))
    decision: Mapped[str] = mapped_column(String(20))  # approved, rejected
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    idempotency_key: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_at_column()


class ActionReceiptRecord(Base):
    """Every distinct receipt a platform gave for a proposal, per delivery cycle."""

    __tablename__ = "action_receipts"
    __table_args__ = (UniqueConstraint("proposal_id", "delivery_cycle", "receipt_digest"),)

    id: Mapped[str] = id_column("rcp")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"), index=True)
    delivery_cycle: Mapped[int] = mapped_column()
    attempt_number: Mapped[int | None] = mapped_column(nullable=True)
    source: Mapped[str] = mapped_column(String(20))  # sync, async
    status: Mapped[str] = mapped_column(String(20))
    receipt: Mapped[dict[str, Any]] = json_column("receipt_json")
    receipt_digest: Mapped[str] = mapped_column(String(100))  # of the stored receipt_json text
    applied_to_proposal: Mapped[bool] = mapped_column(Boolean, default=True)
    connection_attempt_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    received_at: Mapped[datetime] = created_at_column()
