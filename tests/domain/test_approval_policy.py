"""The approval policies' pure rules (SPEC POL-1, POL-2, POL-3, POL-5)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from app.domain import approval_policy as pol

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
DIGEST = "sha256:" + "a" * 64
PEER = pol.Factor("peer", "peer", count=2)
LEAD = pol.Factor("lead", "lead", eligibility=pol.Eligibility(("reviewer",), attributes=(("level", "lead"),)))
TWO_PEERS_AND_LEAD = pol.Policy("peers_and_lead", "Two peers and a lead", (PEER, LEAD), ttl_seconds=3600)
ONE_LEAD = pol.Policy("lead", "A lead", (LEAD,))


def person(name: str, lead: bool = False, roles=("reviewer",), team=None) -> pol.Approver:
    return pol.Approver(name, frozenset(roles), team, {"level": "lead"} if lead else {})


def ballot(*people, decision=pol.APPROVE, digest=DIGEST, expires=NOW + timedelta(hours=1)):
    return [pol.Vote(p, decision, digest, expires) for p in people]


def stand(policies, votes, makers=()):
    return pol.standing(policies, votes, makers=makers, payload_digest=DIGEST, now=NOW)


def test_a_policy_is_an_and_of_factors():
    """POL-1: every factor must be met; progress in words says what is missing."""
    two_peers = stand([TWO_PEERS_AND_LEAD], ballot(person("a"), person("b")))
    assert two_peers.released_by is None
    assert two_peers.alternatives[0].in_words() == "2 of 2 peers, 0 of 1 lead"
    assert stand([TWO_PEERS_AND_LEAD], ballot(person("a"), person("b"), person("c", lead=True))).released_by


def test_alternatives_are_an_or():
    """POL-1: one alternative met releases it; a rejection must veto every alternative."""
    votes = ballot(person("l", lead=True))
    assert stand([TWO_PEERS_AND_LEAD, ONE_LEAD], votes).released_by.policy.key == "lead"
    rejection = ballot(person("r"), decision=pol.REJECT)  # a peer vetoes the first, is not eligible for the second
    result = stand([TWO_PEERS_AND_LEAD, ONE_LEAD], rejection)
    assert result.alternatives[0].vetoed and not result.vetoed


def test_the_deny_count_decides_the_veto():
    """POL-1: a factor with deny count 2 is not vetoed by one rejection."""
    lenient = pol.Policy("lenient", "Lenient", (pol.Factor("peer", "peer", count=1, deny_count=2),))
    one = stand([lenient], ballot(person("a"), decision=pol.REJECT))
    assert not one.vetoed
    assert stand([lenient], ballot(person("a"), person("b"), decision=pol.REJECT)).vetoed


def test_matching_does_not_depend_on_order():
    """POL-2: one person counts for at most one factor, matched so the order of the
    votes never decides whether a policy is met."""
    people = [person("lead1", lead=True), person("peer1"), person("lead2", lead=True)]
    for order in itertools.permutations(people):
        result = stand([TWO_PEERS_AND_LEAD], ballot(*order))
        assert result.released_by is not None, order
        counted = [a for f in result.alternatives[0].factors for a in f.approvers]
        assert sorted(counted) == ["lead1", "lead2", "peer1"]


def test_makers_count_for_nothing():
    """POL-2, FOUR-1: a maker's vote counts for no factor, and the maker is refused."""
    votes = ballot(person("m", lead=True), person("a"), person("b"))
    assert stand([TWO_PEERS_AND_LEAD], votes, makers={"m"}).released_by is None
    refusal = pol.vote_refusal(
        [TWO_PEERS_AND_LEAD], [], person("m"), pol.APPROVE, makers={"m"}, payload_digest=DIGEST, now=NOW
    )
    assert refusal == "maker_checker_violation"


def test_vote_refusals():
    """POL-1, POL-2: not eligible, already given, and an approval that would count for
    no factor (a second peer where one is needed) are refused with their codes."""
    one_peer_one_lead = pol.Policy("pl", "A peer and a lead", (pol.Factor("peer", "peer"), LEAD))

    def refusal(who, votes, decision=pol.APPROVE):
        return pol.vote_refusal([one_peer_one_lead], votes, who, decision, makers=(), payload_digest=DIGEST, now=NOW)

    assert refusal(person("mod", roles=("moderator",)), []) == "approval_not_eligible"
    assert refusal(person("a"), ballot(person("a"))) == "approval_already_given"
    assert refusal(person("b"), ballot(person("a"))) == "approval_factor_already_met"
    assert refusal(person("b"), ballot(person("a")), pol.REJECT) is None  # a rejection still counts
    assert refusal(person("l", lead=True), ballot(person("a"))) is None


def test_stale_and_expired_votes_do_not_count():
    """POL-2: a vote bound to another digest, or past its expiry, no longer counts."""
    stale = ballot(person("l", lead=True), digest="sha256:" + "b" * 64)
    expired = ballot(person("k", lead=True), expires=NOW)
    result = stand([ONE_LEAD], [*stale, *expired])
    assert result.released_by is None
    assert [v.approver.id for v in result.stale] == ["l"] and [v.approver.id for v in result.expired] == ["k"]
    again = pol.vote_refusal(
        [ONE_LEAD], stale, person("l", lead=True), pol.APPROVE, makers=(), payload_digest=DIGEST, now=NOW
    )
    assert again is None  # a vote that no longer counts does not stop its author voting again


def test_a_vote_expires_within_the_authorization():
    """POL-2: the policy's time to live, never beyond the authorization expiry."""
    assert pol.vote_expiry(3600, NOW, NOW + timedelta(days=1)) == NOW + timedelta(hours=1)
    assert pol.vote_expiry(3600, NOW, NOW + timedelta(minutes=5)) == NOW + timedelta(minutes=5)
    assert pol.vote_expiry(None, NOW, NOW + timedelta(days=1)) == NOW + timedelta(days=1)


def test_eligibility_by_team_and_attribute():
    """POL-1: eligibility by role, team and attribute."""
    rule = pol.Eligibility(("reviewer",), ("safety",), (("level", "lead"),))
    assert rule.admits(person("a", lead=True, team="safety"))
    assert not rule.admits(person("b", lead=True, team="growth"))
    assert not rule.admits(person("c", team="safety"))
    assert not rule.admits(person("d", lead=True, roles=("moderator",), team="safety"))


def test_routing_chooses_the_first_matching_route():
    """POL-3: routes over component, action, protection, reversibility and a batch's
    size (min_items); the first match wins; otherwise the default policy."""
    bulk = pol.Policy("bulk", "Bulk", (pol.Factor("reviewer", "reviewer", count=2),))
    settings = pol.ApprovalSettings(
        {"default": pol.DEFAULT_POLICY, "lead": ONE_LEAD, "bulk": bulk},
        (pol.Route(("bulk",), min_items=100), pol.Route(("lead",), component="demo", action_code="ban")),
    )
    facts = pol.RouteFacts("demo", "ban")
    assert pol.route(settings, facts) == ((ONE_LEAD,), settings.routes[1])
    assert pol.route(settings, pol.RouteFacts("demo", "ban", items=99))[0] == (ONE_LEAD,)
    assert pol.route(settings, pol.RouteFacts("demo", "ban", items=100))[0] == (bulk,)
    assert pol.route(settings, pol.RouteFacts("demo", "takedown")) == ((pol.DEFAULT_POLICY,), None)
    assert settings.routes[0].in_words() == "a batch of 100 or more"


def test_irreversible_actions_need_two_reviewers_by_default():
    """POL-5, POL-4: without configured routes an irreversible action (and a protected
    subject's) needs two reviewers; anything else one."""
    policies, rule = pol.route(pol.DEFAULT_SETTINGS, pol.RouteFacts("demo", "delete", irreversible=True))
    assert [p.key for p in policies] == ["two_reviewers"] and rule.in_words() == "an irreversible action"
    one = stand(policies, ballot(person("a")))
    assert one.released_by is None and one.alternatives[0].in_words() == "1 of 2 reviewers"
    assert stand(policies, ballot(person("a"), person("b"))).released_by is not None
    assert pol.route(pol.DEFAULT_SETTINGS, pol.RouteFacts("demo", "takedown"))[0] == (pol.DEFAULT_POLICY,)
    protected = pol.route(pol.DEFAULT_SETTINGS, pol.RouteFacts("demo", "takedown", protected=True))[0]
    assert protected[0].key == "two_reviewers"


def test_the_recorded_route_round_trips():
    """POL-3: what is recorded on a proposal gives back the same policies."""
    facts = pol.RouteFacts("demo", "ban", protected=True)
    record = pol.route_record([TWO_PEERS_AND_LEAD, ONE_LEAD], pol.Route(("x",), protected=True), facts)
    assert pol.policies_of(record) == (TWO_PEERS_AND_LEAD, ONE_LEAD)
    assert record["route_words"] == "a protected subject"
    assert pol.policies_of(None) == (pol.DEFAULT_POLICY,)
