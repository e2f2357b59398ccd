"""The inbox and its count against the rule itself (SPEC POL-1, POL-2, POL-7).

`approval_inbox` reads the rule in parts (admission per recorded route, the maker
and vote parts as SQL, whether an approval would still count over the rows read,
a kept count); `by_the_rule` decides it one proposal at a time from `ballot_of`,
`eligible` and the ballot's refusal. Each test compares the two after what a
break-it pass tried: routes recorded before policies existed (NULL), non-ASCII
records, many settings versions, the inbox page's badge beside other pages', and
random sequences of proposals, settings, votes, standing changes and time."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.domain import approval_policy as pol
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, predicates
from app.services import approval_inbox
from app.services.approval_inbox import awaiting, awaiting_count, forget_kept_counts
from app.services.approval_notices import approver_of, eligible
from app.services.lifecycle.votes import ballot_of

from ..builders import PEER_AND_LEAD, make_operator, make_proposal, set_approval_settings, set_operator_attributes, set_row
from .test_pol_inbox_count import LEADS_ONLY, agrees, fresh, people, vote  # noqa: F401


@pytest.fixture(autouse=True)
def _cold():
    forget_kept_counts()
    yield
    forget_kept_counts()


def by_the_rule(operator_id: str) -> list[str]:
    """The ids the rule says wait for the operator (eligible, and an approval that would count), newest first."""
    operator = fresh(operator_id)
    now = utcnow()
    rows = db.session.scalars(
        select(ActionProposal).where(
            ActionProposal.installation_id == operator.installation_id,
            predicates.awaits_decision(now),
            ActionProposal.bulk_batch_id.is_(None),
        ).order_by(ActionProposal.created_at.desc(), ActionProposal.id.desc())
    ).all()
    out = []
    for p in rows:
        ballot = ballot_of(db.session, p)
        voted = {v.approver.id for v in pol.counting(ballot.votes, payload_digest=p.payload_digest, batch_digest=None, now=now)[0]}
        if not eligible(operator, p.approval_route, ballot.makers, voted):
            continue
        if ballot.refusal(approver_of(operator), pol.APPROVE, p.payload_digest, now) == "approval_factor_already_met":
            continue
        out.append(p.id)
    return out[: approval_inbox.INBOX_LIMIT]


def check(operator_id: str) -> int:
    expected = by_the_rule(operator_id)
    operator = fresh(operator_id)
    assert [p.id for p in awaiting(operator)] == expected
    assert awaiting_count(operator) == len(expected)
    return len(expected)


def test_pol7_proposals_recorded_before_policies_wait_under_the_default(app, team, people):
    """Proposals open before POL (NULL approval_route_json) wait under the default policy."""
    legacy = make_proposal(team)
    set_row(ActionProposal, legacy.id, approval_route=None)
    make_proposal(team)
    set_approval_settings(team.installation_id, LEADS_ONLY)
    make_proposal(team)
    for who in people.values():
        check(who)
    assert legacy.id in by_the_rule(people["peer"])


def test_pol7_non_ascii_records_admit_as_recorded(app, team):
    """A record with non-ASCII labels, team and attribute values is matched by its
    stored text exactly; the operator its team and attribute admit sees both."""
    settings = {
        "policies": [{"key": "chefs", "label": "Un chef d’équipe — «sécurité» 🛡", "ttl_seconds": 3600, "factors": [
            {"key": "chef", "label": "chef", "count": 1, "roles": ["reviewer"], "teams": ["sécurité"],
             "attributes": {"niveau": "chef d’équipe"}}]}],
        "routes": [{"policies": ["chefs"]}],
    }
    chef = make_operator(team.installation_id, "chef", ["reviewer"])
    set_operator_attributes(chef.id, team="sécurité", attributes={"niveau": "chef d’équipe"})
    make_proposal(team)
    set_approval_settings(team.installation_id, settings)
    make_proposal(team)
    assert check(chef.id) == 2
    assert check(team.user("reviewer").id) == 1


def _labelled(n: int) -> dict:
    return {
        "policies": [{"key": "peer_and_lead", "label": f"A peer and a lead (v{n}) — ünïcødé", "ttl_seconds": 3600,
                      "factors": PEER_AND_LEAD["policies"][0]["factors"]}],
        "routes": [{"policies": ["peer_and_lead"]}],
    }


def test_pol7_many_recorded_routes_each_decide_their_proposals(app, team, people):
    """120 distinct recorded routes (settings changed 120 times, one proposal each, with
    non-ASCII labels): the IN list and the mark stay correct; the kept mark holds one
    row per route, by its text's hash (the texts, about 48 KB here, are not kept for
    every operator)."""
    n = 120
    for i in range(n):
        set_approval_settings(team.installation_id, _labelled(i) if i % 2 else LEADS_ONLY | {"policies": [
            {**LEADS_ONLY["policies"][0], "label": f"A lead v{i}"}]})
        make_proposal(team)
    assert check(people["peer"]) == n // 2
    assert check(people["lead"]) == n
    assert check(people["reviewer"]) == n // 2
    peer = fresh(people["peer"])
    kept = approval_inbox._KEPT[(peer.id, peer.installation_id)].mark
    assert len(kept) == n and all(isinstance(row[0], int) for row in kept)


def _nav_badge(html: str) -> int | None:
    import re

    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', html, re.S).group(1)
    found = re.search(r'data-inbox-count="(\d+)"', nav)
    return int(found.group(1)) if found else None


def test_pol7_every_pages_badge_counts_the_inbox(app, client, world):
    """The inbox page (its badge is its own length) and the other pages' kept badge
    agree with the rule for an admin admitted through team and attributes and two
    reviewers, over a NULL route, five settings versions and a record with markup."""
    import re

    from ..builders import add_reports, decide_report, login

    add_reports(world, 12)
    settings = {
        "policies": [{"key": "chefs", "label": "Un chef d’équipe — «sécurité» 🛡 <b>&amp;</b>", "ttl_seconds": 3600,
                      "factors": [{"key": "chef", "label": "chef «x»", "count": 1, "roles": ["reviewer"],
                                   "teams": ["sécurité"], "attributes": {"niveau": "chef d’équipe"}}]}],
        "routes": [{"policies": ["chefs"]}],
    }
    made = [decide_report(world, 0)]
    set_row(ActionProposal, made[0].id, approval_route=None)  # open before POL
    for i in range(1, 6):
        set_approval_settings(world.installation_id, _labelled(i))
        made.append(decide_report(world, i))
    set_approval_settings(world.installation_id, settings)
    made += [decide_report(world, i) for i in range(6, 9)]
    set_operator_attributes(world.users["admin"], team="sécurité", attributes={"niveau": "chef d’équipe", "level": "lead"})
    for email, who in (("admin@example.com", "admin"), ("reviewer@example.com", "reviewer"),
                       ("reviewer2@example.com", "reviewer2")):
        token = login(client, email)
        page = client.get("/inbox")
        assert page.status_code == 200, email
        html = page.get_data(as_text=True)
        ids = re.findall(r'<tr data-proposal="([^"]+)"', html)
        assert ids == by_the_rule(world.users[who]), email
        assert _nav_badge(html) == (len(ids) or None)
        for path in ("/reports", "/proposals", "/tasks", "/bulk", "/"):
            other = client.get(path)
            assert other.status_code in (200, 302, 403), (path, other.status_code)
            if other.status_code == 200:
                assert _nav_badge(other.get_data(as_text=True)) == (len(ids) or None), path
        from ..builders import logout

        logout(client, token)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pol7_random_sequences_keep_the_inbox_and_count_on_the_rule(app, team, people, clock, seed):
    import random

    from app.domain.errors import ApiError

    rng = random.Random(seed)
    chef = make_operator(team.installation_id, "chef", ["reviewer"])
    ids = dict(people, chef=chef.id, reviewer2=make_operator(team.installation_id, "reviewer2").id)
    choices = [PEER_AND_LEAD, LEADS_ONLY, _labelled(7), {
        "policies": [{"key": "chefs", "label": "Chef d’équipe 🛡", "ttl_seconds": 600, "factors": [
            {"key": "chef", "label": "chef", "count": 1, "roles": ["reviewer"], "teams": ["sécurité"]}]},
            {"key": "two", "label": "Deux", "factors": [{"key": "r", "label": "r", "count": 2, "roles": ["reviewer"]}]}],
        "routes": [{"policies": ["chefs", "two"]}]}]
    opened = []
    log = []
    for step in range(60):
        move = rng.choice(["propose", "propose", "settings", "vote", "vote", "vote", "attrs", "null", "clock"])
        try:
            if move == "propose":
                opened.append(make_proposal(team, maker=rng.choice(["moderator", "reviewer2"])))
            elif move == "settings":
                set_approval_settings(team.installation_id, rng.choice(choices))
            elif move == "vote" and opened:
                p = db.session.get(ActionProposal, rng.choice(opened).id)
                who = rng.choice(list(ids.values()))
                decide_ok = rng.random() < 0.85
                from app.services.lifecycle.approval import decide_proposal

                decide_proposal(p.id, decision="approved" if decide_ok else "rejected",
                                payload_digest=p.payload_digest, reason=None if decide_ok else "no, not this",
                                idempotency_key=f"k{step}", operator=fresh(who))
            elif move == "attrs":
                who = rng.choice(list(ids.values()))
                set_operator_attributes(who, team=rng.choice([None, "sécurité", "safety"]),
                                        attributes=rng.choice([{}, {"level": "lead"}]))
            elif move == "null" and opened:
                set_row(ActionProposal, rng.choice(opened).id, approval_route=None)
            elif move == "clock":
                clock.advance(seconds=rng.choice([30, 700, 4000]))
        except ApiError as error:
            db.session.rollback()
            log.append((step, move, error.code))
            continue
        log.append((step, move))
        for name, who in ids.items():
            expected = by_the_rule(who)
            operator = fresh(who)
            assert [p.id for p in awaiting(operator)] == expected, (name, log)
            assert awaiting_count(operator) == len(expected), (name, log)
    assert sum(1 for m in log if m[1] == "vote" and len(m) == 2) >= 3  # some votes were cast
