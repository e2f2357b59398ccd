"""The approval panel's votes, in words (SPEC POL-1..3, POL-5): which policy applied
and why, what is met and what is still missing ("1 of 2 peers, 0 of 1 lead"), each
vote with who gave it, when and until when it counts, the votes that no longer count
and why, and whether the viewer may vote (or why not).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.domain import approval_policy as pol
from app.domain.clock import utcnow
from app.models import ActionProposal, OperatorUser
from app.services.lifecycle.votes import Ballot, approver_of, ballot_of


def clock_words(moment: datetime) -> str:
    """``14:05 UTC`` (with the date when it is not today's)."""
    today = utcnow().date()
    return moment.strftime("%H:%M UTC" if moment.date() == today else "%Y-%m-%d %H:%M UTC")


def eligibility_words(eligibility: pol.Eligibility) -> str:
    """Who counts for a factor, in words: ``reviewer, level lead, team safety``."""
    parts = [" or ".join(eligibility.roles)] if eligibility.roles else []
    if eligibility.teams:
        parts.append("team " + " or ".join(eligibility.teams))
    parts += [f"{key} {value}" for key, value in eligibility.attributes]
    return ", ".join(parts) or "anyone"


def factor_words(factor: pol.Factor) -> str:
    """``1 peer (reviewer)``; ``2 peers (reviewer); 2 rejections veto``."""
    noun = factor.label if factor.count == 1 else pol._plural(factor.label)
    text = f"{factor.count} {noun} ({eligibility_words(factor.eligibility)})"
    if factor.deny_count != 1:
        text += f"; {factor.deny_count} rejections veto"
    return text


@dataclass(frozen=True)
class PolicyLine:
    key: str
    label: str
    factors: str  # "1 peer (reviewer) and 1 lead (reviewer, level lead)"
    progress: str  # "1 of 1 peer, 0 of 1 lead"
    missing: str | None  # "1 lead" or None when met
    vetoed: bool
    ttl: str | None  # "approvals count for 1 hour"


@dataclass(frozen=True)
class VoteLine:
    name: str
    decision: str  # approved, rejected
    at: datetime
    until: datetime
    counts_as: str | None  # the factor it counts for ("peer"), None when it counts for none
    reason: str | None


@dataclass(frozen=True)
class LapsedVote:
    name: str
    decision: str
    at: datetime
    why: str  # "expired at 14:05 UTC", "given for an earlier payload"


@dataclass(frozen=True)
class VotePanel:
    """What the approval panel says about the votes (POL-1..3, POL-5)."""

    policies: tuple[PolicyLine, ...]  # alternatives (OR)
    route_words: str  # why these policies: "the default", "a protected subject"
    irreversible: bool
    protected: bool
    votes: tuple[VoteLine, ...]
    lapsed: tuple[LapsedVote, ...]
    refusal: str | None  # why the viewer may not vote, in words; None when they may
    note: str | None = None  # e.g. their approval would count for nothing, a rejection still would
    refusal_code: str | None = None  # the refusal's code (POL-2's vote refusals)
    approval_counts: bool = True  # False: the viewer's approval would count for no factor (already met)

    @property
    def several(self) -> bool:
        return len(self.policies) > 1

    @property
    def missing(self) -> str | None:
        """What is still missing, in words: "1 lead", or "1 lead or 2 reviewers" across
        the alternatives not vetoed; None when nothing is (POL-2)."""
        parts = [p.missing for p in self.policies if p.missing and not p.vetoed]
        return " or ".join(parts) or None


def _ttl_words(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"approvals count for {hours} hour{'s' if hours != 1 else ''}"
    minutes = max(1, seconds // 60)
    return f"approvals count for {minutes} minute{'s' if minutes != 1 else ''}"


def _missing(progress: pol.PolicyProgress) -> str | None:
    parts = []
    for f in progress.missing():
        left = f.factor.count - len(f.approvers)
        parts.append(f"{left} {f.factor.label if left == 1 else pol._plural(f.factor.label)}")
    return " and ".join(parts) or None


def _refusal_words(code: str, ballot: Ballot, standing: pol.Standing, viewer_id: str) -> str:
    if code == "approval_not_eligible":
        who = "; ".join(
            f"{p.policy.label}: "
            + ", ".join(f"{f.factor.label} ({eligibility_words(f.factor.eligibility)})" for f in p.factors)
            for p in standing.alternatives
        )
        return f"You are not eligible for any part of this approval. Who may approve: {who}."
    if code == "approval_already_given":
        mine = [v for v in ballot.votes if v.approver.id == viewer_id and v.expires_at > utcnow()]
        until = f" It counts until {clock_words(mine[-1].expires_at)}." if mine else ""
        return f"You already voted on this action.{until}"
    if code == "maker_checker_violation":
        return "You took part in making this action; a second person must check it."
    return "Your approval would count for no part of this approval: what you may give is already met."


def vote_panel(operator: OperatorUser, proposal: ActionProposal, makers, session) -> VotePanel:
    """The approval panel's votes for `operator` looking at `proposal` (POL-1..3).

    Args:
        operator: the viewer.
        proposal: the proposal (any state; the viewer's refusal matters only while it
            awaits approval).
        makers: its makers' ids (FOUR-1).
        session: a session.
    """
    now = utcnow()
    ballot = ballot_of(session, proposal, frozenset(makers))
    standing = ballot.standing(proposal.payload_digest, now)
    counted_as = {}
    for progress in standing.alternatives:
        for f in progress.factors:
            for approver_id in f.approvers:
                counted_as.setdefault(approver_id, f.factor.label)
    lapsed_ids = {id(v) for v in (*standing.stale, *standing.expired)}
    votes, lapsed = [], []
    for row, v in zip(ballot.rows, ballot.votes, strict=True):
        name = ballot.names.get(v.approver.id, "someone no longer listed")
        if id(v) in lapsed_ids:
            why = (
                "given for an earlier payload"
                if v.payload_digest != proposal.payload_digest
                else f"expired at {clock_words(v.expires_at)}"
            )
            lapsed.append(LapsedVote(name, v.decision, row.created_at, why))
        else:
            counts = counted_as.get(v.approver.id) if v.decision == pol.APPROVE else None
            votes.append(VoteLine(name, v.decision, row.created_at, v.expires_at, counts, row.reason))
    record = proposal.approval_route or {}
    refusal = note = refusal_code = None
    counts = True
    if v_code := ballot.refusal(approver_of(operator), pol.APPROVE, proposal.payload_digest, now):
        words = _refusal_words(v_code, ballot, standing, operator.id)
        if v_code == "approval_factor_already_met":
            note = words + " You may still reject it."
            counts = False
        else:
            refusal, refusal_code = words, v_code
    return VotePanel(
        policies=tuple(
            PolicyLine(
                p.policy.key,
                p.policy.label,
                " and ".join(factor_words(f.factor) for f in p.factors),
                p.in_words(),
                _missing(p),
                p.vetoed,
                _ttl_words(p.policy.ttl_seconds),
            )
            for p in standing.alternatives
        ),
        route_words=record.get("route_words") or "the default",
        irreversible=bool(record.get("irreversible")),
        protected=bool(record.get("protected")),
        votes=tuple(votes),
        lapsed=tuple(lapsed),
        refusal=refusal,
        note=note,
        refusal_code=refusal_code,
        approval_counts=counts,
    )
