"""Approval policies over a bulk batch (SPEC POL-1..3 for BULK-3).

A batch is approved as one decision over all its items. When it is submitted, the
policies that apply are recorded on it (`record_route`: routing reads the action,
whether any item's target is a protected subject, and the item count, so a route
with ``min_items`` applies). Each reviewer's approval or rejection is then an
`ApprovalVote` bound to the batch digest (its payload digest and its batch digest,
the digest the batch's one approval has always bound) and counting until the
policy's time to live runs out, within the batch's own expiry.

`batch_approval` asks here where the batch stands; when the votes release it, the
batch's ordinary approval runs (drift check, skips, queueing), and when every
alternative is vetoed, its ordinary rejection. A batch whose policy is the default
(one reviewer) keeps the single-approval behaviour and codes of BULK-3 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.domain import approval_policy as pol
from app.domain.bulk.subjects import canonical_reference
from app.domain.errors import ApiError
from app.models import (
    ActionProposal,
    ApprovalVote,
    BulkBatch,
    OperatorUser,
    ProtectedSubject,
    ReportEvidence,
    new_id,
)
from app.services.approval_routing import known_authors, route_facts, route_record_for

P = ActionProposal
CHUNK = 500
REFUSAL_STATUS = {
    "maker_checker_violation": 403,
    "approval_not_eligible": 403,
    "approval_already_given": 409,
    "approval_factor_already_met": 409,
}
REFUSAL_WORDS = {
    "maker_checker_violation": "You started this bulk action or made a decision in it; you count for no factor.",
    "approval_not_eligible": "No factor of the policy that applies admits you.",
    "approval_already_given": "You already voted on this batch; your vote counts.",
    "approval_factor_already_met": "Every factor you could count for is already met; your approval would count for nothing.",
}


def approver_of(operator: OperatorUser) -> pol.Approver:
    """The domain's view of an operator: id, roles, team, attributes."""
    return pol.Approver(operator.id, frozenset(operator.roles), operator.team, dict(operator.attributes or {}))


def policies_of_batch(batch: BulkBatch) -> tuple[pol.Policy, ...]:
    """The alternative policies recorded on the batch (the default when none was)."""
    return pol.policies_of(batch.approval_route)


def is_default(policies: tuple[pol.Policy, ...]) -> bool:
    """Whether the batch needs only the single second reviewer of BULK-3 (then its
    approval keeps the earlier codes and behaviour exactly)."""
    return policies == (pol.DEFAULT_POLICY,)


def protected_in_batch(session, installation_id: str, batch_id: str) -> bool:
    """Whether any item's target is covered by a protected-subject mark (POL-4), as
    `approval_routing.protection_of` reads one target, for all the batch's items in
    a query per 500 (the target's reference; for ``author_of`` targets an account
    mark on its author; an author mark on the author of the reported content)."""
    rows = session.execute(select(P.target_reference, P.target, P.report_id).where(P.bulk_batch_id == batch_id)).all()
    if not rows:
        return False
    report_ids = sorted({r.report_id for r in rows if r.report_id})
    authors: dict[str, set[str]] = {}
    for start in range(0, len(report_ids), CHUNK):
        for report_id, author in session.execute(select(ReportEvidence.report_id, ReportEvidence.author_reference).where(
                ReportEvidence.report_id.in_(report_ids[start : start + CHUNK]),
                ReportEvidence.author_reference.is_not(None))):
            authors.setdefault(report_id, set()).add(canonical_reference(author))
    known = known_authors(session, installation_id, {r.target_reference for r in rows})  # items without evidence
    references = ({r.target_reference for r in rows if r.target_reference} | {a for s in authors.values() for a in s}
                  | set(known.values()))
    marks: dict[str, set[str]] = {}  # reference -> kinds marked
    wanted = sorted(references)
    for start in range(0, len(wanted), CHUNK):
        for reference, kind in session.execute(select(ProtectedSubject.subject_reference, ProtectedSubject.kind).where(
                ProtectedSubject.installation_id == installation_id, ProtectedSubject.unmarked_at.is_(None),
                ProtectedSubject.subject_reference.in_(wanted[start : start + CHUNK]))):
            marks.setdefault(reference, set()).add(kind)
    for row in rows:
        kind = row.target.get("kind") if isinstance(row.target, dict) else None
        by = set()
        if kind != "account":
            by = authors.get(row.report_id, set()) | ({known[row.target_reference]} if row.target_reference in known else set())
        if row.target_reference in marks:
            return True
        if any("author" in marks.get(a, ()) or (kind == "author_of" and a in marks) for a in by):
            return True
    return False


def record_route(session, batch: BulkBatch) -> None:
    """Record on a batch being submitted the policies that apply (POL-3): routing
    reads the action, whether any item's target is protected and the item count.
    Call after the batch's proposals are written."""
    facts = route_facts(session, batch.installation_id, batch.component_version_id, batch.action_code,
                        items=batch.item_count,
                        protected=protected_in_batch(session, batch.installation_id, batch.id))
    batch.approval_route = route_record_for(session, batch.installation_id, facts)


@dataclass(frozen=True)
class CastVote:
    """A stored vote with its author's name, as the page lists it."""

    row: ApprovalVote
    name: str
    vote: pol.Vote


def batch_votes(session, batch: BulkBatch) -> list[CastVote]:
    """The batch's votes, oldest first, each with its author as the domain sees them."""
    rows = session.execute(select(ApprovalVote, OperatorUser).join(OperatorUser, OperatorUser.id == ApprovalVote.approver_id)
                           .where(ApprovalVote.batch_id == batch.id)
                           .order_by(ApprovalVote.created_at, ApprovalVote.id)).all()
    return [CastVote(vote, user.display_name or user.id,
                     pol.Vote(approver_of(user), vote.decision, vote.payload_digest, vote.expires_at, vote.batch_digest,
                              vote.created_at)) for vote, user in rows]


def standing_of(batch: BulkBatch, votes: list[CastVote], makers: set[str], now: datetime) -> pol.Standing:
    """Where the batch's approval stands now (POL-1, POL-2)."""
    return pol.standing(policies_of_batch(batch), [v.vote for v in votes], makers=makers,
                        payload_digest=batch.batch_digest, batch_digest=batch.batch_digest, now=now)


def refusal_of(batch: BulkBatch, votes: list[CastVote], operator: OperatorUser, decision: str, makers: set[str],
               now: datetime) -> str | None:
    """Why the operator may not cast `decision` on the batch now (a code), or None (POL-2)."""
    return pol.vote_refusal(policies_of_batch(batch), [v.vote for v in votes], approver_of(operator), decision,
                            makers=makers, payload_digest=batch.batch_digest, batch_digest=batch.batch_digest, now=now)


def check_vote(batch: BulkBatch, votes: list[CastVote], operator: OperatorUser, decision: str, makers: set[str],
               now: datetime, reason: str | None) -> None:
    """Refuse a vote the policy does not admit (POL-1, POL-2); nothing is written.

    Raises:
        ApiError: 403 ``maker_checker_violation`` / ``approval_not_eligible``; 409
            ``approval_already_given`` / ``approval_factor_already_met``; 400
            ``action_decision_reason_required`` (a rejection without a reason where
            a policy needs one).
    """
    code = refusal_of(batch, votes, operator, decision, makers, now)
    if code:
        raise ApiError(REFUSAL_STATUS[code], code, REFUSAL_WORDS[code])
    if decision == pol.REJECT and not (reason or "").strip() and any(
            p.reason_on_reject for p in policies_of_batch(batch)):
        raise ApiError(400, "action_decision_reason_required", "Say why you reject it: the policy needs a reason.",
                       "reason")


def new_vote(batch: BulkBatch, votes: list[CastVote], operator: OperatorUser, decision: str, reason: str | None,
             makers: set[str], now: datetime) -> ApprovalVote:
    """The vote row to add (POL-2): bound to the batch digest; it expires by the
    shortest time to live of the alternatives it can count for (`expiry_for`), within
    the batch's expiry; it records the policy and factor it counts under."""
    approver = approver_of(operator)
    policies = policies_of_batch(batch)
    trial = pol.Vote(approver, decision, batch.batch_digest, now + timedelta(days=3650), batch.batch_digest, now)
    after = pol.standing(policies, [*(v.vote for v in votes), trial], makers=makers,
                         payload_digest=batch.batch_digest, batch_digest=batch.batch_digest, now=now)
    policy = factor = None
    for progress in after.alternatives:
        counted = next((f.factor for f in progress.factors if approver.id in f.approvers), None)
        eligible = next((f for f in progress.policy.factors if f.eligibility.admits(approver)), None)
        chosen = counted if decision == pol.APPROVE else eligible
        if chosen is not None:
            policy, factor = progress.policy, chosen
            break
    vote_id = new_id("vot")
    return ApprovalVote(
        id=vote_id, installation_id=batch.installation_id, batch_id=batch.id, approver_id=operator.id,
        decision=decision, reason=(reason or "").strip() or None, payload_digest=batch.batch_digest,
        batch_digest=batch.batch_digest, policy_key=policy.key if policy else None,
        factor_key=factor.key if factor else None, idempotency_key=f"bulk:{batch.id}:{vote_id}"[:200],
        created_at=now, expires_at=pol.expiry_for(policies, approver, now, batch.expires_at),
    )


@dataclass(frozen=True)
class VoteLine:
    """One vote as the batch page lists it, and why it no longer counts (if so)."""

    name: str
    decision: str
    reason: str | None
    created_at: Any
    expires_at: Any
    not_counting: str | None = None  # "bound to an earlier batch digest", "expired"


@dataclass(frozen=True)
class BatchApproval:
    """The approval panel of a submitted batch (POL-3): the policies that applied,
    why, their progress in words, each vote and the votes that no longer count, and
    what the viewer may do."""

    policies: tuple[pol.Policy, ...]
    route_words: str
    standing: pol.Standing
    votes: tuple[VoteLine, ...]
    default: bool
    may_approve: bool
    may_reject: bool
    refusal: str | None  # why the viewer may not vote, in words

    @property
    def progress_words(self) -> list[str]:
        return [p.in_words() for p in self.standing.alternatives]


def approval_panel(session, batch: BulkBatch, operator: OperatorUser, makers: set[str] | None,
                   now: datetime) -> BatchApproval:
    """The batch page's approval panel for `operator` (POL-3); `makers` None when the
    batch awaits no approval (the viewer may then not vote)."""
    votes = batch_votes(session, batch)
    policies = policies_of_batch(batch)
    standing = standing_of(batch, votes, makers or set(), now)
    stale = {id(v) for v in standing.stale}
    expired = {id(v) for v in standing.expired}
    lines = tuple(VoteLine(v.name, v.row.decision, v.row.reason, v.row.created_at, v.row.expires_at,
                           "bound to an earlier batch digest" if id(v.vote) in stale else
                           "expired" if id(v.vote) in expired else None)
                  for v in votes)
    may_approve = may_reject = False
    refusal = None
    if makers is not None:
        approve = refusal_of(batch, votes, operator, pol.APPROVE, makers, now)
        reject = refusal_of(batch, votes, operator, pol.REJECT, makers, now)
        may_approve, may_reject = approve is None, reject is None
        if approve and reject:
            refusal = REFUSAL_WORDS[reject]
        elif approve:
            refusal = REFUSAL_WORDS[approve]
    record = batch.approval_route or {}
    return BatchApproval(policies, record.get("route_words", "the default"), standing, lines, is_default(policies),
                         may_approve, may_reject, refusal)
