"""Between proposal rows and the domain's proposal rules (`app.domain.proposal`).

Services read a row as a `Delivery`, ask the domain for a `Change`, and write it
with `move_proposal(session, id, change.move, where=guard(change), values=change.values)`:
the move's source states and every column the decision read, still as read. The
one place a new proposal row is built is `insert_proposal`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm.attributes import set_committed_value

from app.domain.clock import utcnow
from app.domain.proposal.delivery import Change, Delivery
from app.domain.proposal.identity import NewProposal, OriginalFacts, RunFacts
from app.models import ActionApproval, ActionProposal, WorkflowRun, new_id
from app.models.proposals import prebuilt_move

P = ActionProposal


def delivery_of(proposal: ActionProposal) -> Delivery:
    """The proposal's state and delivery bookkeeping as plain values (read it fresh:
    the write is guarded on exactly these values)."""
    return Delivery(
        state=proposal.state,
        expires_at=proposal.expires_at,
        payload_digest=proposal.payload_digest,
        approval_mode=proposal.approval_mode,
        delivery_terminal=proposal.delivery_terminal,
        delivery_attempt_count=proposal.delivery_attempt_count,
        delivery_cycle=proposal.delivery_cycle,
        cycle_start_attempt=proposal.cycle_start_attempt,
        next_attempt_at=proposal.next_attempt_at,
        lease_expires_at=proposal.lease_expires_at,
        accepted_at=proposal.accepted_at,
        confirmation_deadline_at=proposal.confirmation_deadline_at,
        confirmed_at=proposal.confirmed_at,
        last_error_code=proposal.last_error_code,
        not_before=proposal.not_before,
        is_correction=proposal.appeal_id is not None,
        is_compensation=proposal.compensates_proposal_id is not None,
        is_notice=proposal.is_notice,
        in_batch=proposal.bulk_batch_id is not None,
    )


def guard(change: Change) -> tuple:
    """SQL conditions: each expected column still holds its value (NULL as IS NULL)."""
    clauses = []
    for column, value in change.expect.items():
        attribute = getattr(P, column)
        clauses.append(attribute.is_(None) if value is None else attribute == value)
    return (and_(*clauses),) if clauses else ()


def move_at_commit(uow, proposal: ActionProposal, move, expect: dict, values: dict) -> None:
    """`move_loaded` in a batch's first try (a unit of work without savepoints): the
    guarded UPDATE goes out at commit, one executemany with the batch's others, and
    the loaded row is kept as it will be written. Each must change its row; one that
    does not (another writer won) sends the batch to the careful try, where the move
    is made at once (`UnitOfWork.write_later` with ``every_row``)."""
    written = {"updated_at": utcnow(), **values}
    statement, params = prebuilt_move(proposal.id, move, expect, written)
    uow.write_later(statement, params, every_row=True)
    for column, value in {"state": params["v_state"], **written}.items():
        set_committed_value(proposal, column, value)


def run_facts(run: WorkflowRun) -> RunFacts:
    """The run a node belongs to, as the domain's identity rules read it (ID-1, ID-3)."""
    return RunFacts(
        id=run.id,
        installation_id=run.installation_id,
        report_id=run.report_id,
        workflow_version_id=run.workflow_version_id,
        decision_id=run.decision_id,
        created_at=run.created_at,
    )


def original_facts(original: ActionProposal) -> OriginalFacts:
    """An applied proposal as the one a new proposal follows: the compensation or
    correction that answers it, the reversal that ends it (COMP-2, CORR-1, TEMP-2)."""
    return OriginalFacts(
        id=original.id,
        operation_id=original.operation_id,
        installation_id=original.installation_id,
        report_id=original.report_id,
        run_id=original.run_id,
        step_run_id=original.step_run_id,
        workflow_version_id=original.workflow_version_id,
        target=original.target,
        payload_digest=original.payload_digest,
        policy_version_id=original.policy_version_id,
        decision_id=original.decision_id,
        approval_mode=original.approval_mode,
        authority_mode=original.authority_mode,
        temporary=original.temporary,
    )


def proposal_values(new: NewProposal) -> dict[str, Any]:
    """Every column of a new proposal row from the domain's `NewProposal`, by
    attribute name (PREP-8, COMP-2, CORR-1, BULK-3)."""
    return dict(
        id=new.id,
        installation_id=new.installation_id,
        report_id=new.report_id,
        run_id=new.run_id,
        step_run_id=new.step_run_id,
        appeal_id=new.appeal_id,
        decision_id=new.decision_id,
        action_code=new.action_code,
        target=new.target,
        target_reference=target_reference(new.target),
        payload=new.payload,
        preconditions=new.preconditions,
        payload_digest=new.payload_digest,
        component_version_id=new.component_version_id,
        workflow_version_id=new.workflow_version_id,
        policy_version_id=new.policy_version_id,
        authority_mode=new.authority_mode,
        approval_mode=new.approval_mode,
        approval_policy=new.approval_policy,
        expires_at=new.expires_at,
        state=new.state,
        operation_id=new.operation_id,
        compensates_proposal_id=new.compensates_proposal_id,
        created_by_type=new.created_by_type,
        created_by_id=new.created_by_id,
        next_attempt_at=new.next_attempt_at,
        not_before=new.not_before,
        temporary=new.temporary,
        delivery=new.delivery,
        reverses_proposal_id=new.reverses_proposal_id,
        bulk_batch_id=new.bulk_batch_id,
        created_at=new.created_at,
        updated_at=new.created_at,
    )


def target_reference(target: dict[str, Any]) -> str | None:
    """The subject a target names (its ``reference``, in `canonical_reference`'s one
    spelling), kept in a column of its own so "an action of this code on this subject"
    is an indexed question (BULK-2)."""
    from app.domain.bulk.subjects import canonical_reference

    reference = target.get("reference") if isinstance(target, dict) else None
    return canonical_reference(reference)[:500] if isinstance(reference, str) else None


def insert_proposal(session, new: NewProposal) -> ActionProposal:
    """Insert a new proposal row from the domain's `NewProposal` (PREP-8, COMP-2, CORR-1).

    Args:
        session: the unit of work's session.
        new: every column as plain values (the JSON columns store canonical JSON).

    Returns:
        The flushed row.
    """
    from app.services.approval_routing import route_proposal

    proposal = ActionProposal(**proposal_values(new))
    route_proposal(session, proposal)  # POL-3: the policies it waits for, as they are now
    session.add(proposal)
    session.flush()
    return proposal


def approval_of_digest(session, proposal: ActionProposal) -> ActionApproval | None:
    """The approval of exactly the proposal's digest; None when none (bounded automation)."""
    return session.scalar(
        select(ActionApproval).where(
            ActionApproval.proposal_id == proposal.id,
            ActionApproval.decision == "approved",
            ActionApproval.payload_digest == proposal.payload_digest,
        )
    )


def add_inherited_approval(session, approval: ActionApproval, follower: ActionProposal, *, reason: str,
                           key_prefix: str, at) -> None:
    """Record that `approval` of an action also authorizes `follower`, an action its
    digest covered (a temporary action's reversal, TEMP-2; a restriction's notice,
    DSA-4): an approval row for the follower's digest by the same approver; no second
    person is asked. `key_prefix` names the kind (its idempotency key is
    ``{key_prefix}:{approval id}``); `at` is when the authorization took effect."""
    session.add(
        ActionApproval(
            id=new_id("apv"),
            installation_id=follower.installation_id,
            proposal_id=follower.id,
            approver_id=approval.approver_id,
            payload_digest=follower.payload_digest,
            decision="approved",
            reason=reason,
            idempotency_key=f"{key_prefix}:{approval.id}",
            created_at=at,
        )
    )
