"""The makers of a proposal and the approval verdict (FOUR-1, APPR-4, CORR-2, COMP-3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.domain.maker_checker import Verdict, approver_verdict
from app.domain.proposal.makers import (
    DecisionRef,
    MakerFacts,
    MakerSource,
    appeal_verdict,
    makers,
    makers_by_source,
    prepared_decisions,
    verdict,
)

T0 = datetime(2026, 2, 1, tzinfo=UTC)
D1 = DecisionRef("dec_1", "maya", 1, T0)  # started the run
D2 = DecisionRef("dec_2", "rita", 2, T0 + timedelta(minutes=1))  # recorded while the run waited
D3 = DecisionRef("dec_3", "omar", 3, T0 + timedelta(minutes=3))  # after the proposal was prepared
D0 = DecisionRef("dec_0", "old", 0, T0 - timedelta(days=1))  # before the run
PREPARED = T0 + timedelta(minutes=2)


def facts(**fields) -> MakerFacts:
    base = dict(run_decision_id="dec_1", prepared_at=PREPARED, decisions=(D0, D1, D2, D3))
    base.update(fields)
    return MakerFacts(**base)


def test_decisions_current_while_prepared():
    """FOUR-1: from the run's trigger decision up to the moment it was prepared."""
    assert prepared_decisions((D0, D1, D2, D3), "dec_1", PREPARED) == (D1, D2)
    assert prepared_decisions((D0, D1, D2, D3), "dec_1", D2.created_at) == (D1, D2)
    assert prepared_decisions((D0, D1, D2, D3), "dec_2", PREPARED) == (D2,)
    assert prepared_decisions((D0, D1, D2, D3), None, PREPARED) == (D0, D1, D2)  # unknown trigger: all of them
    assert prepared_decisions((D0, D1, D2, D3), "dec_1", None) == ()


def test_every_source():
    """FOUR-1, POL-6: creator, pinned, run, prepared, appeal decision, original decision,
    the emergency actor of the original."""
    by_source = makers_by_source(
        facts(
            created_by_type="operator",
            created_by_id="ada",
            pinned_decision_id="dec_0",
            appeal_decision_maker_id="ines",
            original_decision_ids=("dec_3",),
            emergency_actor_id="erin",
        )
    )
    assert by_source == {
        MakerSource.CREATOR: {"ada"},
        MakerSource.PINNED_DECISION: {"old"},
        MakerSource.RUN_DECISION: {"maya"},
        MakerSource.PREPARED_DECISIONS: {"maya", "rita"},
        MakerSource.APPEAL_DECISION: {"ines"},
        MakerSource.ORIGINAL_DECISION: {"omar"},
        MakerSource.EMERGENCY_ACTOR: {"erin"},
    }
    assert set(by_source) == set(MakerSource)


def test_makers_is_the_union_of_the_sources():
    """FOUR-1: one set, every source together."""
    assert makers(facts()) == {"maya", "rita"}
    assert makers(facts(created_by_type="operator", created_by_id="ada")) == {"ada", "maya", "rita"}
    assert makers(MakerFacts()) == frozenset()


def test_a_system_creator_is_nobody():
    """FOUR-1: only an operator who created a proposal is its maker."""
    assert makers_by_source(facts(created_by_type="system", created_by_id="run_1"))[MakerSource.CREATOR] == set()


def test_unknown_decisions_add_nobody():
    """FOUR-1: a decision id that is not one of the report's names no maker."""
    assert makers(MakerFacts(pinned_decision_id="dec_x", original_decision_ids=("dec_y",))) == frozenset()


def test_verdict_refuses_non_reviewers_and_every_maker():
    """APPR-4, FOUR-1: the reason names why."""
    f = facts(created_by_type="operator", created_by_id="ada", appeal_decision_maker_id="ines")
    f = MakerFacts(**{**f.__dict__, "original_decision_ids": ("dec_3",), "emergency_actor_id": "erin"})
    assert verdict("zoe", ["reviewer"], f)
    assert verdict("zoe", ["moderator"], f).reason == "Only reviewers can approve or reject actions."
    assert verdict("ada", ["reviewer"], f).reason.startswith("You proposed this action")
    assert verdict("maya", ["reviewer"], f).reason.startswith("You made a decision this action carries")
    assert verdict("rita", ["reviewer"], f).reason.startswith("You made a decision this action carries")
    assert verdict("ines", ["reviewer"], f).reason.startswith("You made the appeal decision")
    assert verdict("omar", ["reviewer"], f).reason.startswith("You made the decision the appeal overturned")
    assert verdict("erin", ["reviewer"], f).reason.startswith("You took the emergency action this one undoes")
    assert all("second reviewer" in verdict(m, ["reviewer"], f).reason for m in ("ada", "maya", "ines", "omar", "erin"))


def test_appeal_verdict():
    """CORR-2: a reviewer who did not make the contested decision decides the appeal."""
    assert appeal_verdict("zoe", ["reviewer"], "maya") == Verdict(True)
    assert appeal_verdict("zoe", ["reviewer"], None) == Verdict(True)
    assert appeal_verdict("zoe", ["moderator"], "maya") == Verdict(False, "Only reviewers decide appeals.")
    assert appeal_verdict("maya", ["reviewer", "admin"], "maya") == Verdict(
        False, "You made the decision this appeal contests; another reviewer must decide it."
    )


def test_approver_verdict_ignores_empty_makers():
    """APPR-4: None entries are nobody."""
    assert approver_verdict("zoe", ["reviewer"], [None, "maya"]) == Verdict(True)
    assert approver_verdict("maya", ("reviewer",), [None, "maya"]) == Verdict(
        False, "You made this decision or proposed this action; a second reviewer must check it."
    )
    assert bool(approver_verdict("zoe", ["auditor"], [])) is False
