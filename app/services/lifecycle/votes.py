"""Load what the approval policies of a proposal read (SPEC POL-1, POL-2): the
alternatives recorded on it, its makers, and each person's votes with who cast them.

The rules are in `app.domain.approval_policy`; this module only turns rows into the
domain's `Approver` and `Vote` values (one query for the votes and their approvers).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain import approval_policy as pol
from app.models import ActionProposal, ApprovalVote, OperatorUser
from app.services.lifecycle.maker_lookup import makers_of

NOT_ELIGIBLE = "approval_not_eligible"
REFUSALS = {
    "maker_checker_violation": (403, "You took part in making this action; a second person must check it."),
    NOT_ELIGIBLE: (403, "No approval this action needs is one you may give (see who may approve it)."),
    "approval_already_given": (409, "Your vote on this action is already recorded and still counts."),
    "approval_factor_already_met": (
        409,
        "The part of the approval you may give is already met; the action waits for someone else.",
    ),
}


def approver_of(operator: OperatorUser) -> pol.Approver:
    """The domain's view of an operator as an approver: roles, team, attributes (POL-1)."""
    return pol.Approver(operator.id, frozenset(operator.roles), operator.team, dict(operator.attributes or {}))


@dataclass(frozen=True)
class Ballot:
    """What a proposal's approval reads: its alternatives, makers and votes (rows and
    domain values in the same order)."""

    policies: tuple[pol.Policy, ...]
    makers: frozenset[str]
    rows: tuple[ApprovalVote, ...]
    votes: tuple[pol.Vote, ...]
    names: dict[str, str]  # approver id -> display name

    def standing(self, payload_digest: str, now) -> pol.Standing:
        """Where the approval stands now (POL-1, POL-2)."""
        return pol.standing(self.policies, self.votes, makers=self.makers, payload_digest=payload_digest, now=now)

    def refusal(self, approver: pol.Approver, decision: str, payload_digest: str, now) -> str | None:
        """Why `approver` may not cast `decision` now (an error code of `REFUSALS`), or None."""
        return pol.vote_refusal(
            self.policies, self.votes, approver, decision, makers=self.makers, payload_digest=payload_digest, now=now
        )


def ballot_of(session, proposal: ActionProposal, makers: frozenset[str] | None = None) -> Ballot:
    """The policies recorded on `proposal` (`policies_of(approval_route)`; the default
    for one prepared before POL), its makers (FOUR-1, loaded unless given) and every
    vote on it, oldest first, with its approver (POL-1, POL-2)."""
    found = session.execute(
        select(ApprovalVote, OperatorUser)
        .join(OperatorUser, OperatorUser.id == ApprovalVote.approver_id)
        .where(ApprovalVote.proposal_id == proposal.id)
        .order_by(ApprovalVote.created_at, ApprovalVote.id)
    ).all()
    rows = tuple(row for row, _ in found)
    votes = tuple(
        pol.Vote(approver_of(who), row.decision, row.payload_digest, row.expires_at, row.batch_digest, row.created_at)
        for row, who in found
    )
    return Ballot(
        policies=pol.policies_of(proposal.approval_route),
        makers=frozenset(makers_of(session, proposal) if makers is None else makers),
        rows=rows,
        votes=votes,
        names={who.id: who.display_name for _, who in found},
    )


eligible_policies = pol.eligible_policies  # POL-1 (the domain's)


def eligibility_refusal(session, proposal: ActionProposal, operator: OperatorUser) -> str | None:
    """``approval_not_eligible`` when no factor of any alternative recorded on the
    proposal admits the operator (POL-1), else None. Makers are refused elsewhere."""
    policies = pol.policies_of(proposal.approval_route)
    return None if eligible_policies(policies, approver_of(operator)) else NOT_ELIGIBLE
