"""A retired component version only stops NEW preparation (SPEC FOUR-7, FOUR-5): every
proposal already prepared with it (retry of a failed action, a scheduled reversal that
failed for good, an "end now" that follows an action made with it) keeps the version it
was prepared with and delivers. Retiring still answers 409 ``component_version_in_use``
while anything needs the version, with a count that includes reversals failed for good
and temporary actions in force."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, ComponentVersion
from app.services.admin.version_retirement import retire_component_version, version_users
from app.services.lifecycle import reversals
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.retry import retry_proposal

from ..builders import approve, decide_report, reload, reversal_of, set_row
from .test_prepare import prepare_again, run_for

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target




def retire(world, slug: str) -> str:
    """Retire the version as an approved retirement did before FOUR-7 counted right
    (or a version retired while a proposal was being prepared with it)."""
    version_id = world.components[slug]
    set_row(ComponentVersion, version_id, retired_at=utcnow())
    return version_id


def refused_in_use(world, slug: str, users: int) -> None:
    version = db.session.get(ComponentVersion, world.components[slug])
    with pytest.raises(ApiError) as refused:
        retire_component_version(world.user("admin"), version.definition_id, version.id)
    assert (refused.value.status, refused.value.code) == (409, "component_version_in_use")
    assert refused.value.message.startswith(f"{users} open proposal")
    db.session.rollback()
    assert db.session.get(ComponentVersion, version.id).retired_at is None


def failed_reversal(world, platform) -> tuple[ActionProposal, ActionProposal]:
    """A suspension applied; its scheduled reversal refused for good by the platform (400)."""
    original = decide_report(world, 0, code="suspend_account")
    if original.state == "approval_required":
        approve(world, original)
    assert deliver(original.id).state == "applied"
    reversal = reversal_of(original)
    past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, reversal.id, not_before=past, next_attempt_at=past)
    platform.state.configure(fail_next=1, fail_status=400)
    deliver(reversal.id)
    row = reload(reversal)
    assert (row.state, row.delivery_terminal) == ("failed", True)
    assert platform.state.accounts[AUTHOR] == "suspended"
    return reload(original), row


def test_four7_retiring_counts_a_reversal_failed_for_good(app, world, platform):
    """FOUR-7: the reversal failed for good can still be retried or replaced by "end now",
    both with its version: the change page counts it (it said 0 users and let a second
    admin strand the suspension)."""
    failed_reversal(world, platform)
    assert version_users(db.session, world.installation_id, world.components["unsuspend_account"]) == 1
    refused_in_use(world, "unsuspend_account", 1)


def test_four7_retiring_counts_a_temporary_action_in_force_whose_reversal_uses_it(app, world, platform):
    """FOUR-7: a suspension in force whose scheduled reversal was cancelled by hand still
    needs the reversal's version for an "end now"."""
    original, failed = failed_reversal(world, platform)
    set_row(ActionProposal, failed.id, state="cancelled", delivery_terminal=False)
    assert version_users(db.session, world.installation_id, world.components["unsuspend_account"]) == 1


@pytest.mark.parametrize("how", ["retry", "end_now"])
def test_four7_a_failed_reversal_of_a_retired_version_still_lifts_the_suspension(app, world, platform, how):
    """FOUR-7, FOUR-5 (break-it): the reversal failed for good with a 400, then its
    version was retired; a retry (new delivery cycle) and a four-eyes "end now" (which
    follows the action and uses its reversal's version) both deliver with the version
    they were prepared with, instead of failing ``action_component_unavailable``."""
    original, failed = failed_reversal(world, platform)
    retire(world, "unsuspend_account")
    if how == "retry":
        retry_proposal(
            failed.id, payload_digest=failed.payload_digest, idempotency_key="r-1", operator=world.user("reviewer")
        )
        outcome = deliver(failed.id)
    else:
        change = reversals.propose_change(
            original.id, kind="end_now", operator=world.user("reviewer2"), idempotency_key="end-1"
        )
        end_now = db.session.get(ActionProposal, change.proposal_id)
        assert end_now.component_version_id == world.components["unsuspend_account"]
        approve(world, end_now, reviewer="reviewer")
        outcome = deliver(end_now.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"


def test_four7_an_ordinary_failed_action_retried_after_retirement_delivers(app, world, platform):
    """FOUR-7: a takedown refused for good (400) holds its version (409 while it can be
    retried); once the version is retired anyway, the retry delivers with it; a NEW
    decision whose workflow uses the retired version is refused as before (PREP-3)."""
    proposal = decide_report(world, 0)
    approve(world, proposal)
    platform.state.configure(fail_next=1, fail_status=400)
    deliver(proposal.id)
    failed = reload(proposal)
    assert (failed.state, failed.delivery_terminal) == ("failed", True)
    refused_in_use(world, "takedown", 1)

    retire(world, "takedown")
    retry_proposal(
        failed.id, payload_digest=failed.payload_digest, idempotency_key="r-1", operator=world.user("reviewer")
    )
    outcome = deliver(failed.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)

    assert decide_report(world, 1) is None
    run = run_for(world, 1)
    assert (run.state, run.outcome_port, run.last_error_code) == ("failed", "error", "action_component_unavailable")


def test_four7_a_replay_of_the_node_keeps_its_retired_version(app, world, platform):
    """FOUR-7, PREP-7: the action node that prepared a proposal runs again after its
    version was retired: it replays the stored proposal instead of failing the run."""
    proposal = decide_report(world, 0)
    retire(world, "takedown")
    outcome = prepare_again(proposal)
    assert outcome.waiting and outcome.idempotent_replay and outcome.proposal_id == proposal.id


def test_four7_a_compensation_may_use_only_the_retired_version_of_the_action_it_follows(app, world, platform):
    """FOUR-7: a compensation choosing a retired version afresh is refused (409
    ``action_component_unavailable``); one using the version the compensated action
    was prepared with is proposed."""
    from app.services.lifecycle.compensation import propose_compensation

    original = decide_report(world, 0)
    approve(world, original)
    assert deliver(original.id).state == "applied"
    original = reload(original)
    retire(world, "restore")
    retire(world, "takedown")

    def compensate(slug: str, key: str):
        return propose_compensation(
            original.id,
            component_version_id=world.components[slug],
            action_code=slug,
            target=original.target,
            payload=original.payload if slug == "takedown" else {"reason_code": "mistake", "report_reference": "R-1"},
            idempotency_key=key,
            operator=world.user("reviewer"),
        )

    with pytest.raises(ApiError) as refused:
        compensate("restore", "comp-1")
    assert (refused.value.status, refused.value.code) == (409, "action_component_unavailable")
    result = compensate("takedown", "comp-2")
    assert result.state == "approval_required" and not result.idempotent_replay


def test_four7_an_appeal_correction_of_a_suspension_uses_its_retired_reversal_version(app, world, platform):
    """FOUR-7: the suspension was prepared with its reversal's version (retired since); an
    appeal reversed the decision: the correction that lifts the suspension uses that
    version, is approved and delivers."""
    from app.services.cases.appeals import decide_appeal, file_appeal
    from app.services.uow import Actor

    from ..builders import proposal_of

    original = decide_report(world, 0, code="suspend_account")
    approve(world, original)
    assert deliver(original.id).state == "applied"
    retire(world, "unsuspend_account")
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="I was not harassing anyone.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    decide_appeal(appeal_id, outcome="reversed", rationale="Not harassment", operator=world.user("reviewer2"))
    correction = proposal_of(world.report_ids[0])
    assert correction.appeal_id and correction.component_version_id == world.components["unsuspend_account"]
    approve(world, correction, reviewer="admin")
    outcome = deliver(correction.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"
