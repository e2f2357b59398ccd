"""Break-it tests for the approval policies (SPEC POL-1..7).

Each `xfail(strict=True)` test is an attack that succeeds today (a finding); the
plain tests are attacks that are correctly refused, named by their POL rule.
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    ActionApproval,
    ActionProposal,
    ApprovalSettingsVersion,
    ApprovalVote,
    AuditEvent,
    BulkBatch,
    ConfigChange,
    EmergencyReview,
    Report,
)
from app.services.admin.approval_policies import parse_document, propose_settings
from app.services.bulk.actions import bulk_actions
from app.services.bulk.batch_approval import approve_batch
from app.services.bulk.dry_runs import start_dry_run
from app.services.bulk.submission import submit_batch
from app.services.lifecycle.approval import decide_proposal
from app.services.lifecycle.emergency import act_in_emergency, review_emergency

from ..builders import (
    PEER_AND_LEAD,
    make_operator,
    make_proposal,
    reload,
    set_approval_settings,
    set_operator_attributes,
    set_row,
)

REASON = "Live-streamed attack spreading now; every minute it stays up it is re-shared"


def count(model, *where) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model).where(*where))


def snapshot():
    return tuple(count(m) for m in (ApprovalVote, ActionApproval, AuditEvent, EmergencyReview, ConfigChange,
                                    ApprovalSettingsVersion))


def vote(proposal, operator, decision="approved", reason=None, key=None):
    return decide_proposal(proposal.id, decision=decision, payload_digest=proposal.payload_digest, reason=reason,
                           idempotency_key=key or f"{operator.id}-{decision}", operator=operator)


def refusal(call):
    """(status, code) of a refused call, asserting it stored nothing."""
    before = snapshot()
    with pytest.raises(ApiError) as caught:
        call()
    assert snapshot() == before
    return caught.value.status, caught.value.code


@pytest.fixture
def people(app, team):
    set_approval_settings(team.installation_id, PEER_AND_LEAD)
    found = {"reviewer": team.user("reviewer"), "peer": make_operator(team.installation_id, "peer", ["reviewer"])}
    lead = make_operator(team.installation_id, "lead", ["reviewer"])
    set_operator_attributes(lead.id, team="safety", attributes={"level": "lead"})
    found["lead"] = lead
    found["boss"] = make_operator(team.installation_id, "boss", ["moderator", "reviewer", "emergency"])
    db.session.expire_all()
    return {name: db.session.get(type(op), op.id) for name, op in found.items()}


# -- POL-1 / POL-2: counting twice, replays, self-approval -------------------------------


def test_pol2_one_person_cannot_count_twice_with_a_fresh_idempotency_key(app, team, people):
    """POL-2 (refused): a peer's second approval under a new key is ``approval_already_given``;
    the lead who already counted as peer cannot come back as lead."""
    proposal = make_proposal(team)
    vote(proposal, people["lead"])
    assert refusal(lambda: vote(proposal, people["lead"], key="again")) == (409, "approval_already_given")
    assert refusal(lambda: vote(proposal, people["lead"], "rejected", "changed my mind", key="r")) == (
        409, "approval_already_given")
    assert reload(proposal).state == "approval_required"


def test_pol2_a_replayed_key_cannot_be_turned_into_another_decision(app, team, people):
    """POL-2 (refused): the idempotency key of an approval reused for a rejection, or for
    another proposal, is ``idempotency_key_reused``; a true replay changes nothing."""
    first, second = make_proposal(team), make_proposal(team)
    vote(first, people["peer"], key="k1")
    assert refusal(lambda: vote(first, people["peer"], "rejected", "oops not this", key="k1")) == (
        409, "idempotency_key_reused")
    assert refusal(lambda: vote(second, people["peer"], key="k1")) == (409, "idempotency_key_reused")
    before = snapshot()
    assert vote(first, people["peer"], key="k1").idempotent_replay
    assert snapshot() == before


def test_pol2_the_maker_cannot_approve_even_as_a_lead(app, team, people):
    """POL-2, FOUR-1 (refused): the maker holding the lead attribute is refused."""
    proposal = make_proposal(team, maker="lead")
    assert refusal(lambda: vote(proposal, people["lead"])) == (403, "maker_checker_violation")


def test_pol1_garbage_decision_and_digest_are_clear_400s(app, team, people):
    """POL-1 (refused): a decision, key or digest of the wrong type is a 400 code, never a 500."""
    proposal = make_proposal(team)
    for kwargs, code in [
        (dict(decision="APPROVED"), "action_decision_invalid"),
        (dict(decision=None), "action_decision_invalid"),
        (dict(idempotency_key="x" * 201), "idempotency_key_invalid"),
        (dict(idempotency_key=7), "idempotency_key_invalid"),
        (dict(payload_digest=None), "action_approval_digest_mismatch"),
        (dict(reason=["a list"]), "action_decision_reason_invalid"),
    ]:
        args = dict(decision="approved", payload_digest=proposal.payload_digest, reason=None,
                    idempotency_key="garbage", operator=people["peer"])
        args.update(kwargs)
        status, got = refusal(lambda: decide_proposal(proposal.id, **args))  # noqa: B023
        assert got == code, (kwargs, got)
        assert status in (400, 409)


# -- POL-1: eligibility of a batch vote vs a single vote ---------------------------------

TEAM_ONLY = {
    "policies": [{
        "key": "team_pair", "label": "A reviewer and someone of safety", "ttl_seconds": 3600,
        "factors": [
            {"key": "peer", "label": "peer", "count": 1, "roles": ["reviewer"]},
            {"key": "safety", "label": "safety member", "count": 1, "teams": ["safety"]},
        ],
    }],
    "routes": [{"policies": ["team_pair"]}],
}


def test_pol1_an_auditor_in_the_team_is_refused_for_a_single_proposal(app, team):
    """POL-1, APPR-4 (refused): a team-only factor still needs a reviewer: an auditor in
    team safety cannot approve a single proposal."""
    set_approval_settings(team.installation_id, TEAM_ONLY)
    auditor = make_operator(team.installation_id, "auditor", ["auditor"])
    set_operator_attributes(auditor.id, team="safety")
    db.session.expire_all()
    auditor = db.session.get(type(auditor), auditor.id)
    proposal = make_proposal(team)
    status, _ = refusal(lambda: vote(proposal, auditor))
    assert status == 403


def _batch(team, count: int) -> BulkBatch:
    moderator = make_operator(team.installation_id, "moderator")
    action = bulk_actions(db.session, team.installation_id)[0]
    batch_id = start_dry_run(moderator, selection={"source": "list", "text": "\n".join(f"post:{n}" for n in range(count))},
                             action_key=action.key, decision_code=action.decision_code, reason="spam network")
    submit_batch(moderator, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    db.session.expire_all()
    return db.session.get(BulkBatch, batch_id)


def test_pol1_an_auditor_in_the_team_counts_for_a_batch(app, team):
    """POL-1 (break-it, fixed): approvers always hold the reviewer role (APPR-4); an auditor in a team-only factor cannot approve a batch."""
    set_approval_settings(team.installation_id, TEAM_ONLY)
    auditor = make_operator(team.installation_id, "auditor", ["auditor"])
    set_operator_attributes(auditor.id, team="safety")
    db.session.expire_all()
    auditor = db.session.get(type(auditor), auditor.id)
    batch = _batch(team, 3)
    with pytest.raises(ApiError) as caught:
        approve_batch(auditor, batch.id, batch.batch_digest)
    assert caught.value.status == 403


# -- POL-6: emergency ----------------------------------------------------------------------


def test_pol6_emergency_needs_the_role_and_a_real_reason(app, team, people):
    """POL-6 (refused): a lead without the emergency role, a reason of padding or
    invisible characters: refused, nothing stored, the proposal still waits."""
    proposal = make_proposal(team)
    act = lambda who, reason: act_in_emergency(proposal.id, reason=reason, payload_digest=proposal.payload_digest,  # noqa: E731
                                                idempotency_key="e1", operator=who)
    assert refusal(lambda: act(people["lead"], REASON)) == (403, "emergency_not_permitted")
    for thin in ["\u200b" * 40 + "a b c d e", "x " * 40, None, "aaaa " * 10, "\u202e" * 60]:
        assert refusal(lambda: act(people["boss"], thin)) == (400, "emergency_reason_too_thin"), repr(thin)  # noqa: B023
    assert reload(proposal).state == "approval_required"


def test_pol6_the_actor_cannot_review_their_own_emergency(app, team, people):
    """POL-6 (refused): the one who acted alone, and the maker, cannot give the review."""
    proposal = make_proposal(team, maker="reviewer")
    result = act_in_emergency(proposal.id, reason=REASON, payload_digest=proposal.payload_digest,
                              idempotency_key="e1", operator=people["boss"])
    assert refusal(lambda: review_emergency(result.review_id, verdict="agree", reason="fine by me",
                                            operator=people["boss"])) == (403, "emergency_review_by_actor")
    assert refusal(lambda: review_emergency(result.review_id, verdict="agree", reason="fine by me",
                                            operator=people["reviewer"])) == (403, "emergency_review_by_maker")


def test_pol6_an_emergency_on_a_case_that_changed_is_refused(app, team, people):
    """POL-6, POL-2 (break-it, fixed): acting alone re-checks the preconditions too; a case appealed since is refused."""
    proposal = make_proposal(team)
    set_row(Report, proposal.report_id, state="appealed")
    status, code = refusal(lambda: act_in_emergency(
        proposal.id, reason=REASON, payload_digest=proposal.payload_digest, idempotency_key="e1",
        operator=people["boss"]))
    assert (status, code) == (409, "action_case_no_longer_eligible")


# -- POL-3: settings documents as a misbehaving input ---------------------------------------


def _doc(**policy_overrides):
    policy = {**PEER_AND_LEAD["policies"][0], **policy_overrides}
    return {"policies": [policy], "routes": [{"policies": [policy["key"]]}]}


BAD_DOCUMENTS = {
    "not json": "{policies: [}",
    "a list": "[]",
    "NaN ttl": json.dumps(_doc()).replace('"ttl_seconds": 3600', '"ttl_seconds": NaN'),
    "Infinity ttl": json.dumps(_doc()).replace('"ttl_seconds": 3600', '"ttl_seconds": Infinity'),
    "huge ttl": json.dumps(_doc()).replace('"ttl_seconds": 3600', '"ttl_seconds": ' + "9" * 5000),
    "ttl as text": json.dumps(_doc(ttl_seconds="3600")),
    "count 10**18": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "count": 10**18, "roles": ["reviewer"]}])),
    "count 0": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "count": 0, "roles": ["reviewer"]}])),
    "count 1.5": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "count": 1.5, "roles": ["reviewer"]}])),
    "count true": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "count": True, "roles": ["reviewer"]}])),
    "roles as a string": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "roles": "reviewer"}])),
    "unknown role": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "roles": ["god"]}])),
    "nobody eligible": json.dumps(_doc(factors=[{"key": "peer", "label": "peer", "roles": []}])),
    "no factors": json.dumps(_doc(factors=[])),
    "NUL in label": json.dumps(_doc(label="A\u0000B")),
    "fullwidth key": json.dumps(_doc(key="ｐｅｅｒ")),
    "missing routes": json.dumps({"policies": PEER_AND_LEAD["policies"]}),
    "route to unknown policy": json.dumps({"policies": PEER_AND_LEAD["policies"], "routes": [{"policies": ["nope"]}]}),
    "route min_items text": json.dumps({**_doc(), "routes": [{"policies": ["peer_and_lead"], "min_items": "5"}]}),
    "route protected text": json.dumps({**_doc(), "routes": [{"policies": ["peer_and_lead"], "protected": "yes"}]}),
    "emergency 0 s": json.dumps({**_doc(), "emergency_review_seconds": 0}),
    "emergency huge": json.dumps({**_doc(), "emergency_review_seconds": 10**30}),
    "duplicate policy keys": json.dumps({"policies": PEER_AND_LEAD["policies"] * 2, "routes": []}),
    "deep nesting": '{"policies": ' + "[" * 5000 + "]" * 5000 + ', "routes": []}',
    "webhook not http": json.dumps({**_doc(), "notify_webhook_url": "ftp://example.com/x"}),
    "webhook with creds": json.dumps({**_doc(), "notify_webhook_url": "https://u:p@example.com/x"}),
}


@pytest.mark.parametrize("name", sorted(BAD_DOCUMENTS))
def test_pol3_a_bad_settings_document_is_a_clear_400_and_stores_nothing(app, world, name):
    """POL-3 (refused): every malformed settings document is 400
    ``approval_settings_invalid``; no pending change, no settings version."""
    admin = world.user("admin")
    status, code = refusal(lambda: propose_settings(admin, parse_document(BAD_DOCUMENTS[name])))
    assert (status, code) == (400, "approval_settings_invalid")


def test_pol3_a_settings_change_needs_a_second_admin(app, world):
    """POL-3, FOUR-2 (refused): a lone admin's settings document is only a pending
    change; the proposer cannot approve it."""
    from ..builders import approve_change

    admin = world.user("admin")
    before = count(ApprovalSettingsVersion)
    pending = propose_settings(admin, parse_document(json.dumps(_doc())))
    assert count(ApprovalSettingsVersion) == before
    with pytest.raises(ApiError) as caught:
        approve_change(world, pending, approver="admin")
    assert caught.value.status == 403
    assert count(ApprovalSettingsVersion) == before


# -- POL-7: the inbox -------------------------------------------------------------------------


def test_pol7_the_inbox_does_not_count_what_you_may_no_longer_approve(app, team, people):
    """POL-7 (break-it, fixed): the inbox leaves out what the viewer's approval would no longer count for."""
    from app.services.approval_inbox import awaiting, awaiting_count

    proposal = make_proposal(team)
    vote(proposal, people["peer"])
    assert refusal(lambda: vote(proposal, people["reviewer"]))[1] == "approval_factor_already_met"
    db.session.expire_all()
    reviewer = db.session.get(type(people["reviewer"]), people["reviewer"].id)
    assert proposal.id not in [p.id for p in awaiting(reviewer)]
    assert awaiting_count(reviewer) == 0


def test_pol7_the_inbox_drops_a_proposal_once_you_voted_and_never_shows_the_maker(app, team, people):
    """POL-7, FOUR-1 (correct): a maker and someone whose vote counts do not see it waiting."""
    from app.services.approval_inbox import awaiting_count

    proposal = make_proposal(team, maker="reviewer")
    db.session.expire_all()
    assert awaiting_count(db.session.get(type(people["reviewer"]), people["reviewer"].id)) == 0
    vote(proposal, people["lead"])
    db.session.expire_all()
    assert awaiting_count(db.session.get(type(people["lead"]), people["lead"].id)) == 0


# -- POL-4: other spellings of a protected reference ---------------------------------------


def _protected_route_for_account_spelled(world, spelling):
    """An account mark on user:5120; a report whose account target the platform spells
    `spelling`; the moderator's decision: the approval route recorded on its proposal."""
    from app.services.admin.protected_subjects import propose_mark
    from app.services.cases.reports import intake_report

    from ..builders import approve_change, decide

    approve_change(world, propose_mark(world.user("admin"), "account", "user:5120", "verified public figure"))
    report_id = intake_report({"external_id": f"spell-{len(spelling)}-{ord(spelling[-1])}-{ord(spelling[0])}",
                               "targets": [{"reference": spelling, "kind": "account"}]},
                              world.integration_id).report_id
    return decide(world, report_id).approval_route


@pytest.mark.parametrize("spelling", ["USER:5120", " user:5120 "])
def test_pol4_another_spelling_of_a_protected_account_still_routes_protected(app, world, spelling):
    """POL-4 (correct): case and surrounding spaces fold to the marked reference."""
    assert _protected_route_for_account_spelled(world, spelling)["protected"] is True


@pytest.mark.parametrize("spelling", ["user:5120\u200b", "user:5120\u202e", "user:\uff15120", "\uff35ser:5120"])
def test_pol4_an_invisible_or_lookalike_spelling_dodges_the_protected_policy(app, world, spelling):
    """POL-4 (break-it, fixed): a target reference with invisible, bidi or lookalike characters is refused at intake (FOUR-10), so it cannot dodge a protected mark."""
    try:
        route = _protected_route_for_account_spelled(world, spelling)
    except ApiError as error:  # refused at intake with a clear code: also acceptable
        assert error.status == 400, error.code
        return
    assert route["protected"] is True


# -- BULK items cannot be decided or rushed one by one ---------------------------------------


def test_pol6_a_batch_item_cannot_be_approved_or_rushed_alone(app, team, people):
    """POL-3, POL-6, BULK-3 (refused): an item of a batch under a two-person policy can
    neither be voted on alone nor taken through the emergency path."""
    set_approval_settings(team.installation_id, {**PEER_AND_LEAD, "routes": [{"policies": ["peer_and_lead"]}]})
    batch = _batch(team, 3)
    item = db.session.scalar(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch.id))
    assert refusal(lambda: vote(item, people["peer"]))[1] == "action_decided_with_its_batch"
    assert refusal(lambda: act_in_emergency(item.id, reason=REASON, payload_digest=item.payload_digest,
                                            idempotency_key="e-item", operator=people["boss"]))[1] == (
        "action_decided_with_its_batch")


# -- POL-2: a vote's time to live under alternative policies -----------------------------------

TWO_ALTERNATIVES = {
    "policies": [
        {"key": "two_leads", "label": "Two leads", "ttl_seconds": 30 * 24 * 3600,
         "factors": [{"key": "lead", "label": "lead", "count": 2, "roles": ["reviewer"],
                      "attributes": {"level": "lead"}}]},
        {"key": "peer_and_lead", "label": "A peer and a lead (fresh)", "ttl_seconds": 60,
         "factors": [{"key": "peer", "label": "peer", "count": 1, "roles": ["reviewer"]},
                     {"key": "lead", "label": "lead", "count": 1, "roles": ["reviewer"],
                      "attributes": {"level": "lead"}}]},
    ],
    "routes": [{"policies": ["two_leads", "peer_and_lead"]}],
}


def test_pol2_a_vote_older_than_the_short_ttl_does_not_release_a_single_proposal(app, team, people, clock):
    """POL-2 (correct): a lead's vote expires by the shortest time to live of the
    alternatives it can count for; 5 minutes later a peer does not release it with it."""
    set_approval_settings(team.installation_id, TWO_ALTERNATIVES)
    proposal = make_proposal(team)
    vote(proposal, people["lead"])
    clock.advance(minutes=5)
    assert vote(proposal, people["peer"]).state == "approval_required"


def test_pol2_a_vote_older_than_the_short_ttl_releases_a_batch(app, team, people, clock):
    """POL-2 (break-it, fixed): a batch vote expires by the shortest time to live of the alternatives it can count for."""
    set_approval_settings(team.installation_id, TWO_ALTERNATIVES)
    batch = _batch(team, 3)
    lead, peer = people["lead"], people["peer"]
    assert approve_batch(lead, batch.id, batch.batch_digest)["approved"] == 0
    clock.advance(minutes=5)
    result = approve_batch(peer, batch.id, batch.batch_digest)
    assert result["approved"] == 0 and "waiting" in result


# -- POL-1: an operator's attributes are a four-eyes change the subject cannot approve -----------


def test_pol1_an_admin_cannot_approve_their_own_lead_attribute(app, world):
    """POL-1, FOUR-2 (refused): admin proposes level=lead for admin2; admin2 cannot
    approve it for themselves; the attributes stay unchanged."""
    from app.models import OperatorUser
    from app.services.admin.operator_teams import propose_operator_attributes

    from ..builders import approve_change

    admin2 = world.user("admin2")
    pending = propose_operator_attributes(world.user("admin"), admin2.id, team="safety", attributes="level=lead")
    with pytest.raises(ApiError) as caught:
        approve_change(world, pending, approver="admin2")
    assert caught.value.status == 403
    db.session.expire_all()
    assert (db.session.get(OperatorUser, admin2.id).attributes or {}) == {}
    with pytest.raises(ApiError) as caught:  # nor can the proposer
        approve_change(world, pending, approver="admin")
    assert caught.value.status == 403


# -- POL-2: concurrent votes --------------------------------------------------------------------


def test_pol2_a_peer_and_a_lead_voting_at_once_release_it_exactly_once(app, team, people):
    """POL-2 (correct): votes on one proposal serialize; a peer and a lead racing (each
    twice, with fresh keys) give one release, one ActionApproval, two counting votes."""
    from concurrent.futures import ThreadPoolExecutor

    proposal = make_proposal(team)
    ids = {name: people[name].id for name in ("peer", "lead")}

    def attempt(args):
        index, name = args
        with app.app_context():
            from app.models import OperatorUser

            operator = db.session.get(OperatorUser, ids[name])
            try:
                return vote(proposal, operator, key=f"race-{name}-{index}").state
            except ApiError as error:
                return error.code

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, enumerate(["peer", "lead", "peer", "lead"])))
    assert results.count("approved") == 1, results
    assert set(results) <= {"approved", "approval_required", "approval_already_given",
                            "action_not_awaiting_approval", "action_approval_changed"}, results
    assert count(ActionApproval, ActionApproval.proposal_id == proposal.id) == 1
    assert count(ApprovalVote, ApprovalVote.proposal_id == proposal.id) == 2
    assert reload(proposal).state == "queued"


def test_pol3_a_factor_only_non_deciders_can_hold_is_refused(app, world):
    """POL-1, POL-3 (break-it, fixed): a factor whose roles leave out the reviewer role is refused in the settings."""
    doc = _doc(factors=[{"key": "audit", "label": "auditor", "count": 1, "roles": ["auditor"]}])
    status, code = refusal(lambda: propose_settings(world.user("admin"), parse_document(json.dumps(doc))))
    assert (status, code) == (400, "approval_settings_invalid")


# -- POL-4 through a bulk batch -----------------------------------------------------------------


def _protected_batch(world, selection):
    from app.services.admin.protected_subjects import propose_mark

    from ..builders import add_report_with_evidence, approve_change

    approve_change(world, propose_mark(world.user("admin"), "author", "user:5120", "every post of a journalist"))
    add_report_with_evidence(world, "bulk-prot-1", "post:7001", author_reference="user:5120", author_name="greg")
    moderator = world.user("moderator")
    action = bulk_actions(db.session, world.installation_id)[0]
    batch_id = start_dry_run(moderator, selection=selection, action_key=action.key,
                             decision_code=action.decision_code, reason="spam network")
    submit_batch(moderator, batch_id, db.session.get(BulkBatch, batch_id).dry_run_digest)
    db.session.expire_all()
    return db.session.get(BulkBatch, batch_id)


def test_pol4_a_batch_of_a_protected_authors_posts_routes_protected(app, world):
    """POL-4, POL-3 (correct): a batch selected by the protected author is protected."""
    batch = _protected_batch(world, {"source": "author", "author_reference": "user:5120"})
    assert batch.approval_route["protected"] is True


@pytest.mark.parametrize("text", ["post:7001\npost:99999", "POST:7001"])
def test_pol4_a_pasted_list_with_a_protected_authors_post_dodges_the_protected_policy(app, world, text):
    """POL-4 (break-it, fixed): a pasted list's item without evidence still knows its author from the queue, so the batch is protected."""
    batch = _protected_batch(world, {"source": "list", "text": text})
    item = db.session.scalar(select(ActionProposal).where(ActionProposal.bulk_batch_id == batch.id,
                                                          ActionProposal.target_reference == "post:7001"))
    assert item is not None  # the protected author's post is an item of the batch
    assert batch.approval_route["protected"] is True


# -- POL-6: the actor overriding the review of their own emergency ---------------------------------


def test_pol6_the_actor_cannot_reject_the_compensation_of_their_own_emergency(app, team, people):
    """POL-6/FOUR-1: the one who acted alone is a maker of the compensation a disagreeing
    review proposes; they can neither reject nor approve it."""
    from app.services.lifecycle.dispatch import deliver

    proposal = make_proposal(team)
    result = act_in_emergency(proposal.id, reason=REASON, payload_digest=proposal.payload_digest,
                              idempotency_key="e1", operator=people["boss"])
    deliver(proposal.id)
    assert reload(proposal).state == "applied"
    done = review_emergency(result.review_id, verdict="disagree", reason="Routine spam, not an emergency",
                            operator=people["reviewer"])
    compensation = db.session.get(ActionProposal, done.compensation_proposal_id)
    status, code = refusal(lambda: vote(compensation, people["boss"], "rejected", "it was urgent, I stand by it"))
    assert status == 403
    assert refusal(lambda: vote(compensation, people["boss"], "approved")) == (status, code)


def test_pol6_the_sql_makers_rule_counts_the_emergency_actor(app, team, people):
    """POL-6/FOUR-1: the "needs my approval" SQL twin (`is_a_maker`) agrees with `makers`
    on the emergency actor of a compensated action, for every operator."""
    from app.services.lifecycle.approval import makers_of
    from app.services.lifecycle.dispatch import deliver
    from app.services.lifecycle.maker_lookup import is_a_maker

    proposal = make_proposal(team)
    result = act_in_emergency(proposal.id, reason=REASON, payload_digest=proposal.payload_digest,
                              idempotency_key="e1", operator=people["boss"])
    deliver(proposal.id)
    done = review_emergency(result.review_id, verdict="disagree", reason="Routine spam, not an emergency",
                            operator=people["reviewer"])
    db.session.rollback()
    proposals = db.session.scalars(select(ActionProposal)).all()
    for person in people.values():
        in_sql = set(db.session.scalars(select(ActionProposal.id).where(is_a_maker(person.id))))
        in_python = {p.id for p in proposals if person.id in makers_of(db.session, p)}
        assert in_sql == in_python, person.id
    assert done.compensation_proposal_id in set(
        db.session.scalars(select(ActionProposal.id).where(is_a_maker(people["boss"].id)))
    )


# -- POL-4 under bounded automation ---------------------------------------------------------------


def test_pol4_bounded_automation_does_not_skip_the_protected_policy(app, platform):
    """POL-4: under a bounded_auto workflow an action on a protected author's post is not
    sent by automation; it waits for a person under the protected policy."""
    from app.services.admin.protected_subjects import propose_mark

    from ..builders import add_report_with_evidence, approve_change, decide, make_world

    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    approve_change(world, propose_mark(world.user("admin"), "author", "user:5120", "every post of a journalist"))
    report_id = add_report_with_evidence(world, "auto-prot", "post:7001", author_reference="user:5120")
    proposal = decide(world, report_id)
    assert proposal.state == "approval_required"
    assert proposal.approval_route and proposal.approval_route["protected"] is True
    assert proposal.approval_mode == "human" and proposal.approval_policy["requested_mode"] == "bounded_auto"
    proposed = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "action.proposed",
                                                          AuditEvent.target_id == proposal.id))
    assert proposed.details["protected_subject_id"] == proposal.approval_policy["protected_subject_id"]
    assert proposed.details["requested_mode"] == "bounded_auto"
    # an action on an unprotected author's post is still automated (FOUR-3)
    other = decide(world, add_report_with_evidence(world, "auto-free", "post:7002", author_reference="user:6000"))
    assert other.approval_mode == "bounded_auto" and other.state != "approval_required"
