"""The makers of a proposal: the people who may never approve it (SPEC FOUR-1,
APPR-4, CORR-2, COMP-3).

`makers` is the one rule. Its inputs are plain ids, one field per `MakerSource`;
services load them (`app.services.lifecycle.maker_lookup`) and the console's "needs my
approval" filter is generated, source by source, from the same list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from app.domain.maker_checker import REVIEWER_ROLE, Verdict, approver_verdict


class MakerSource(StrEnum):
    """Where a maker comes from; every source counts for every proposal."""

    CREATOR = "creator"  # the operator who created it (a compensation's proposer)
    PINNED_DECISION = "pinned_decision"  # the decision it pins and enforces
    RUN_DECISION = "run_decision"  # the decision that started its run
    PREPARED_DECISIONS = "prepared_decisions"  # decisions current while it was prepared
    APPEAL_DECISION = "appeal_decision"  # a correction's appeal decision
    ORIGINAL_DECISION = "original_decision"  # the decision a correction overturns or the original enforced
    EMERGENCY_ACTOR = "emergency_actor"  # who acted alone on the original it corrects or compensates (POL-6)


@dataclass(frozen=True)
class DecisionRef:
    """One of the report's decisions: who made it and where it stands in the report's order."""

    id: str
    maker_id: str
    seq: int
    created_at: datetime


@dataclass(frozen=True)
class MakerFacts:
    """The ids the makers of one proposal (or one manual correction) are drawn from.

    Attributes:
        created_by_type, created_by_id: the creator; only an ``operator`` counts.
        pinned_decision_id: the decision the proposal enforces (its ``decision_id``).
        run_decision_id: the decision that started the proposal's run.
        prepared_at: when the proposal was prepared; None for a manual correction.
        decisions: the report's decisions (for the decisions current when prepared).
        appeal_decision_maker_id: a correction's appeal decision maker.
        original_decision_ids: the decision a correction's appeal contests and the
            decision the corrected or compensated original enforced.
        emergency_actor_id: the operator who acted alone (POL-6) on the original a
            correction or compensation undoes; they may not judge its undoing.
    """

    created_by_type: str = "system"
    created_by_id: str | None = None
    pinned_decision_id: str | None = None
    run_decision_id: str | None = None
    prepared_at: datetime | None = None
    decisions: tuple[DecisionRef, ...] = ()
    appeal_decision_maker_id: str | None = None
    original_decision_ids: tuple[str, ...] = ()
    emergency_actor_id: str | None = None


def prepared_decisions(
    decisions: Iterable[DecisionRef], run_decision_id: str | None, prepared_at: datetime | None
) -> tuple[DecisionRef, ...]:
    """The decisions a proposal may carry as "the report's latest decision when it was
    prepared" (FOUR-1): every decision from its run's trigger decision (by the report's
    sequence; all of them when the trigger is unknown) up to the moment it was prepared.

    Taking the whole window, not one row, means no decision recorded while a run was
    between nodes (or committed while a node was being prepared) escapes the set.
    """
    if prepared_at is None:
        return ()
    decisions = tuple(decisions)
    trigger = next((d for d in decisions if d.id == run_decision_id), None)
    floor = trigger.seq if trigger is not None else 0
    return tuple(d for d in decisions if d.seq >= floor and d.created_at <= prepared_at)


def makers_by_source(facts: MakerFacts) -> dict[MakerSource, frozenset[str]]:
    """Each source's makers (FOUR-1); a source with nobody maps to an empty set."""
    by_id = {d.id: d.maker_id for d in facts.decisions}

    def made(*decision_ids: str | None) -> frozenset[str]:
        return frozenset(by_id[i] for i in decision_ids if i in by_id)

    creator = facts.created_by_id if facts.created_by_type == "operator" else None
    prepared = prepared_decisions(facts.decisions, facts.run_decision_id, facts.prepared_at)
    return {
        MakerSource.CREATOR: frozenset({creator} - {None}),
        MakerSource.PINNED_DECISION: made(facts.pinned_decision_id),
        MakerSource.RUN_DECISION: made(facts.run_decision_id),
        MakerSource.PREPARED_DECISIONS: frozenset(d.maker_id for d in prepared),
        MakerSource.APPEAL_DECISION: frozenset({facts.appeal_decision_maker_id} - {None}),
        MakerSource.ORIGINAL_DECISION: made(*facts.original_decision_ids),
        MakerSource.EMERGENCY_ACTOR: frozenset({facts.emergency_actor_id} - {None}),
    }


def makers(facts: MakerFacts) -> frozenset[str]:
    """The operators who took part in making a proposal; none of them may approve it,
    claim its approval task or record its correction (FOUR-1).

    Returns:
        The operator ids of every `MakerSource` together.
    """
    return frozenset().union(*makers_by_source(facts).values())


REASONS = {
    MakerSource.CREATOR: "You proposed this action",
    MakerSource.APPEAL_DECISION: "You made the appeal decision this correction carries out",
    MakerSource.ORIGINAL_DECISION: "You made the decision the appeal overturned or the original action enforced",
    MakerSource.EMERGENCY_ACTOR: "You took the emergency action this one undoes",
}
DECISION_REASON = "You made a decision this action carries"
SECOND_PERSON = "; a second reviewer must check it."


def verdict(operator_id: str, roles: Iterable[str], facts: MakerFacts) -> Verdict:
    """Whether an operator may decide (approve, reject, claim, record) a proposal
    (APPR-4, FOUR-1), with the reason shown beside the disabled controls.

    Args:
        operator_id: who wants to decide.
        roles: their roles; the ``reviewer`` role is needed.
        facts: the proposal's maker facts.
    """
    by_source = makers_by_source(facts)
    decided = approver_verdict(operator_id, roles, frozenset().union(*by_source.values()))
    if decided or REVIEWER_ROLE not in set(roles):
        return decided
    source = next(source for source, ids in by_source.items() if operator_id in ids)
    return Verdict(False, REASONS.get(source, DECISION_REASON) + SECOND_PERSON)


def appeal_verdict(operator_id: str, roles: Iterable[str], contested_maker_id: str | None) -> Verdict:
    """Whether an operator may decide an appeal: a reviewer who did not make the
    contested decision (CORR-2)."""
    if REVIEWER_ROLE not in set(roles):
        return Verdict(False, "Only reviewers decide appeals.")
    if operator_id == contested_maker_id:
        return Verdict(False, "You made the decision this appeal contests; another reviewer must decide it.")
    return Verdict(True)
