"""The navigation's count of what waits for an operator (SPEC POL-7) keeps its SQL
part per operator beside a mark of the open proposals and their votes
(`approval_inbox.awaiting_count`). Each test warms that count, changes one thing
the rule reads, and checks the count against the inbox itself (`awaiting`), which
is never kept. The voters' standing cases and the clock stamped ahead were found by
the break-it pass."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import ActionProposal, OperatorUser
from app.services import approval_inbox
from app.services.approval_inbox import KEPT_SECONDS, awaiting, awaiting_count, forget_kept_counts
from app.services.lifecycle.approval import decide_proposal

from ..builders import PEER_AND_LEAD, make_operator, make_proposal, set_approval_settings, set_operator_attributes, set_row


@pytest.fixture(autouse=True)
def _cold():
    forget_kept_counts()  # the kept rows are per process: start and end each test without them
    yield
    forget_kept_counts()


@pytest.fixture
def people(app, team):
    """Under "1 peer + 1 lead": peers `reviewer`, `peer`; the lead `lead`."""
    set_approval_settings(team.installation_id, PEER_AND_LEAD)
    made = {"reviewer": team.user("reviewer"), "peer": make_operator(team.installation_id, "peer", ["reviewer"])}
    made["lead"] = make_operator(team.installation_id, "lead", ["reviewer"])
    set_operator_attributes(made["lead"].id, team="safety", attributes={"level": "lead"})
    return {name: op.id for name, op in made.items()}


def fresh(operator_id: str) -> OperatorUser:
    db.session.expire_all()
    return db.session.get(OperatorUser, operator_id)


def agrees(operator_id: str) -> int:
    """The kept count, after checking it equals the inbox's length."""
    operator = fresh(operator_id)
    count = awaiting_count(operator)
    assert count == len(awaiting(operator))
    return count


def vote(proposal, operator_id: str, key: str = "") -> None:
    decide_proposal(proposal.id, decision="approved", payload_digest=proposal.payload_digest, reason=None,
                    idempotency_key=f"{operator_id}-approved{key}", operator=fresh(operator_id))


def test_pol7_the_kept_count_follows_new_proposals_and_votes(app, team, people):
    """POL-7: a proposal arriving, someone else's vote that meets the factor the
    viewer would fill, and the viewer's own vote each change the count at once."""
    assert agrees(people["peer"]) == 0
    first = make_proposal(team)
    assert agrees(people["peer"]) == 1
    make_proposal(team)
    assert agrees(people["peer"]) == 2
    vote(first, people["reviewer"])  # the peer factor is met: the peer's approval would count for nothing
    assert agrees(people["peer"]) == 1
    assert agrees(people["lead"]) == 2
    vote(first, people["lead"])  # released: it leaves everyone's inbox
    assert agrees(people["lead"]) == 1
    assert agrees(people["reviewer"]) == 1  # the second; the first is released


def test_pol7_the_kept_count_follows_expiry(app, team, people, clock):
    """POL-2, POL-7: a vote that expires counts no more, and a proposal whose
    authorization expired waits for nobody; the kept count follows the clock."""
    proposal = make_proposal(team)
    vote(proposal, people["peer"])
    assert agrees(people["lead"]) == 1 and agrees(people["peer"]) == 0
    clock.advance(hours=2)  # the policy's votes live one hour
    assert agrees(people["peer"]) == 1
    expires_at = db.session.get(ActionProposal, proposal.id).expires_at
    clock.advance(seconds=(expires_at - fresh(people["peer"]).created_at).total_seconds() + 86400 * 30)
    assert agrees(people["peer"]) == 0 and agrees(people["lead"]) == 0


def test_pol7_the_kept_count_follows_the_operators_standing(app, team, people):
    """POL-1, POL-7: an operator's attributes, roles and deactivation change what
    admits them; the count is kept per standing, not per person."""
    proposal = make_proposal(team)
    vote(proposal, people["reviewer"])  # only a lead's approval counts now
    assert agrees(people["peer"]) == 0
    set_operator_attributes(people["peer"], team="safety", attributes={"level": "lead"})
    assert agrees(people["peer"]) == 1
    set_row(OperatorUser, people["peer"], roles_text="auditor")
    assert agrees(people["peer"]) == 0
    set_row(OperatorUser, people["peer"], roles_text="reviewer")
    assert agrees(people["peer"]) == 1
    set_row(OperatorUser, people["peer"], active=False)
    assert awaiting_count(fresh(people["peer"])) == 0


def test_pol7_the_count_follows_a_voters_standing(app, team, people):
    """POL-1, POL-7: whether the viewer's approval would still count reads the voters'
    standing; a voter who loses the role, or whose attributes now fill another
    factor, opens the factor again for the viewer at once."""
    proposal = make_proposal(team)
    vote(proposal, people["reviewer"])  # the peer factor is met
    assert agrees(people["peer"]) == 0
    set_row(OperatorUser, people["reviewer"], roles_text="auditor")  # their vote counts for no factor now
    assert agrees(people["peer"]) == 1
    set_row(OperatorUser, people["reviewer"], roles_text="reviewer")
    assert agrees(people["peer"]) == 0
    set_operator_attributes(people["reviewer"], team="safety", attributes={"level": "lead"})  # fills the lead factor
    assert agrees(people["peer"]) == 1


def test_pol7_a_proposal_stamped_ahead_hides_changes_for_a_bounded_time(app, team, clock):
    """POL-7: a proposal whose ``updated_at`` came from a clock ahead of the others
    keeps the mark's latest time; one proposal leaving as another enters then leaves
    the mark as it was. The kept rows are read again after `KEPT_SECONDS` at most
    (the inbox page is exact throughout)."""
    viewer = make_operator(team.installation_id, "reviewer2")
    leaving = make_proposal(team)
    clock.advance(minutes=10)
    make_proposal(team)  # stamped ten minutes ahead
    clock.advance(minutes=-10)
    assert agrees(viewer.id) == 2
    decide_proposal(leaving.id, decision="rejected", payload_digest=leaving.payload_digest, reason="not this one",
                    idempotency_key="reject-leaving", operator=fresh(team.user("reviewer").id))
    make_proposal(team, maker="reviewer2")  # enters, not the viewer's to approve
    assert len(awaiting(fresh(viewer.id))) == 1
    clock.advance(seconds=KEPT_SECONDS + 1)
    assert agrees(viewer.id) == 1


LEADS_ONLY = {
    "policies": [{"key": "leads", "label": "A lead", "ttl_seconds": 3600, "factors": [
        {"key": "lead", "label": "lead", "count": 1, "roles": ["reviewer"], "attributes": {"level": "lead"}}]}],
    "routes": [{"policies": ["leads"]}],
}


def test_pol7_the_count_reads_each_proposals_own_recorded_policies(app, team, people):
    """POL-1, POL-7: the count decides admission once per distinct recorded route, and
    each proposal is judged by its own: a peer waits on the proposal recorded under
    "a peer and a lead", not on the one recorded after the settings became "a lead"."""
    make_proposal(team)
    set_approval_settings(team.installation_id, LEADS_ONLY)
    make_proposal(team)
    assert agrees(people["peer"]) == 1
    assert agrees(people["lead"]) == 2


def test_pol7_newer_proposals_for_others_never_hide_one_for_me(app, team, people, monkeypatch):
    """POL-7 (break-it): the candidates are read in batches of INBOX_LIMIT until that many
    pass the policy part, so INBOX_LIMIT newer proposals only a lead may approve do not
    hide an older one a peer may approve, from the count or the inbox. (INBOX_LIMIT is
    2 here, standing for 200.)"""
    monkeypatch.setattr(approval_inbox, "INBOX_LIMIT", 2)
    older = make_proposal(team)  # "a peer and a lead"
    set_approval_settings(team.installation_id, LEADS_ONLY)
    for _ in range(5):
        make_proposal(team)
    assert [p.id for p in awaiting(fresh(people["peer"]))] == [older.id]
    assert agrees(people["peer"]) == 1
    assert agrees(people["lead"]) == 2  # the limit still holds


def test_pol7_proposals_whose_factor_is_met_never_hide_one_that_needs_me(app, team, people, monkeypatch):
    """POL-7 (break-it): under "a peer and a lead", newer proposals whose peer factor is
    met (leads are the bottleneck) do not hide an older one with no vote from a peer,
    and the kept count reads the next batch when its rows yield too few."""
    monkeypatch.setattr(approval_inbox, "INBOX_LIMIT", 2)
    first = make_proposal(team)
    assert agrees(people["peer"]) == 1  # kept: one batch, exhausted
    newer = [make_proposal(team) for _ in range(4)]
    for n, proposal in enumerate(newer):
        vote(proposal, people["reviewer"], key=str(n))  # the peer factor is met
    assert [p.id for p in awaiting(fresh(people["peer"]))] == [first.id]
    assert agrees(people["peer"]) == 1


def test_pol7_a_kept_count_reads_no_votes_until_something_changes(app, team, people, monkeypatch):
    """POL-7 (break-it): an operator admitted to few of many open proposals (here a
    peer where the peer factor of every newer one is met) is counted once, reading
    every batch and its votes; the next pages read only the mark and the voters'
    standing, until a vote or a voter's standing changes. (INBOX_LIMIT 2 stands for 200.)"""
    from ..web.test_query_counts import counting

    monkeypatch.setattr(approval_inbox, "INBOX_LIMIT", 2)
    first = make_proposal(team)
    newer = [make_proposal(team) for _ in range(4)]
    for n, proposal in enumerate(newer):
        vote(proposal, people["reviewer"], key=str(n))
    peer = fresh(people["peer"])
    with counting(app) as cold:
        assert awaiting_count(peer) == 1
    with counting(app) as warm:
        assert awaiting_count(peer) == 1
    assert sum("approval_votes.decision" in q for q in cold) >= 2  # the votes of each batch
    assert len(warm) == 2 and not any("approval_votes.decision" in q for q in warm)  # mark, voters
    set_row(OperatorUser, people["reviewer"], roles_text="auditor")  # their votes count for no factor now
    assert agrees(people["peer"]) == 2  # five wait for the peer again; the limit holds
    set_row(OperatorUser, people["reviewer"], roles_text="reviewer")
    assert agrees(people["peer"]) == 1


def test_pol7_a_proposal_committed_late_hides_changes_for_a_bounded_time(app, team, clock):
    """POL-7 (break-it): a proposal stamped before the newest open one and committed
    after it (its time is taken before its unit of work commits), entering as another
    leaves, also leaves the mark as it was; the kept count is read again after
    `KEPT_SECONDS` at most (the inbox page is exact throughout)."""
    viewer = make_operator(team.installation_id, "reviewer2")
    leaving = make_proposal(team)
    make_proposal(team)
    assert agrees(viewer.id) == 2
    decide_proposal(leaving.id, decision="rejected", payload_digest=leaving.payload_digest, reason="not this one",
                    idempotency_key="reject-leaving", operator=fresh(team.user("reviewer").id))
    clock.advance(seconds=-10)
    make_proposal(team, maker="reviewer2")  # stamped ten seconds back; not the viewer's to approve
    clock.advance(seconds=10)
    assert len(awaiting(fresh(viewer.id))) == 1
    clock.advance(seconds=KEPT_SECONDS + 1)
    assert agrees(viewer.id) == 1


def test_pol7_an_operator_reads_only_proposals_whose_recorded_policies_admit_them(app, team, people, monkeypatch):
    """POL-1, POL-7 (break-it): admission is decided once per distinct recorded route
    before the candidates are read, so a peer among many proposals only a lead may
    approve reads one short batch, not every open proposal (INBOX_LIMIT 2 stands for
    200); the one that admits them is still found."""
    from ..web.test_query_counts import counting

    monkeypatch.setattr(approval_inbox, "INBOX_LIMIT", 2)
    older = make_proposal(team)  # "a peer and a lead"
    set_approval_settings(team.installation_id, LEADS_ONLY)
    for _ in range(6):
        make_proposal(team)
    peer = fresh(people["peer"])
    with counting(app) as statements:
        assert awaiting_count(peer) == 1
        assert [p.id for p in awaiting(peer)] == [older.id]
    batches = [q for q in statements if "ORDER BY action_proposals.created_at DESC" in q]
    assert len(batches) == 2  # one for the count, one for the inbox
    assert agrees(people["lead"]) == 2
