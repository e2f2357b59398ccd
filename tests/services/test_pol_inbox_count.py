"""The navigation's count of what waits for an operator (SPEC POL-7) is kept per
operator beside a mark of the open proposals and their votes
(`approval_inbox.awaiting_count`). Each test warms that count, changes one thing
the rule reads, and checks the count against the inbox itself (`awaiting`), which
is never kept."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import ActionProposal, OperatorUser
from app.services.approval_inbox import awaiting, awaiting_count
from app.services.lifecycle.approval import decide_proposal

from ..builders import PEER_AND_LEAD, make_operator, make_proposal, set_approval_settings, set_operator_attributes, set_row


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
