"""Nothing approved is stranded (SPEC FOUR-7): reversals and appeal corrections never
draw on enforcement budgets, and a reversal that failed for good can always be
retried or ended early under four-eyes, whether or not an appeal closed the case."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import ActionProposal, Budget, BudgetReservation
from app.services.cases.appeals import decide_appeal, file_appeal
from app.services.lifecycle import reversals
from app.services.lifecycle.budget_reservations import window_start
from app.services.lifecycle.dispatch import deliver
from app.services.lifecycle.retry import retry_proposal
from app.services.uow import Actor, unit_of_work

from ..builders import approve, decide_report, make_world, proposal_of, reload, reversal_of, set_row, time_reaches

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target






def suspended(world, platform) -> ActionProposal:
    proposal = decide_report(world, 0, code="suspend_account")
    if proposal.state == "approval_required":
        approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "suspended"
    return reload(proposal)


def exhaust_budgets(installation_id: str, proposal) -> None:
    """One admin lowered every budget covering `proposal` to a full window: a budget on
    its workflow version, its component version and every queue, each used up."""
    now = utcnow()
    with unit_of_work() as uow:
        uow.session.execute(update(Budget).values(active=False))
        for scope_type, scope_id in (
            ("workflow", proposal.workflow_version_id),
            ("component", proposal.component_version_id),
        ):
            uow.session.add(
                Budget(
                    installation_id=installation_id,
                    scope_type=scope_type,
                    scope_id=scope_id,
                    metric="actions",
                    limit_amount=1,
                    used_amount=1,
                    window_seconds=86_400,
                    window_start=window_start(now, 86_400),
                )
            )
        uow.commit()


def test_four7_scheduled_reversal_is_not_deferred_by_an_exhausted_budget(app, world, platform):
    """FOUR-7: a scheduled reversal whose workflow and component budgets are used up is
    still sent at its time (no ``budget_exhausted`` deferral) and reserves nothing."""
    original = suspended(world, platform)
    reversal = reversal_of(original)
    exhaust_budgets(world.installation_id, reversal)
    time_reaches(reversal)
    outcome = deliver(reversal.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"
    reserved = select(BudgetReservation.id).where(BudgetReservation.operation_id == reversal.operation_id)
    assert db.session.scalar(reserved) is None


def test_four7_bounded_auto_reversal_needs_no_budget(app, platform):
    """FOUR-7, FOUR-3: the reversal of a bounded-automation suspension is sent even when
    no budget covers it any more (never ``action_budget_missing``), or none has room."""
    world = make_world(platform.url, approval_mode="bounded_auto")
    platform.configure_for(world)
    original = suspended(world, platform)
    reversal = reversal_of(original)
    assert reversal.approval_mode == "bounded_auto"
    with unit_of_work() as uow:
        uow.session.execute(update(Budget).values(active=False))
        uow.commit()
    time_reaches(reversal)
    outcome = deliver(reversal.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"


def test_four7_end_now_is_not_deferred_by_an_exhausted_budget(app, world, platform):
    """FOUR-7: an approved "end now" is sent at once even with every budget used up."""
    original = suspended(world, platform)
    end_now = db.session.get(
        ActionProposal,
        reversals.propose_change(
            original.id, kind="end_now", operator=world.user("reviewer2"), idempotency_key="e-1"
        ).proposal_id,
    )
    approve(world, end_now, reviewer="reviewer")
    exhaust_budgets(world.installation_id, reload(end_now))
    outcome = deliver(end_now.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"


def test_four7_appeal_correction_is_not_deferred_by_an_exhausted_budget(app, world, platform):
    """FOUR-7: an appeal correction that undoes a suspension is sent even with every
    budget covering it used up."""
    suspended(world, platform)
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="I was not harassing anyone.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    decide_appeal(appeal_id, outcome="reversed", rationale="Not harassment", operator=world.user("reviewer2"))
    correction = proposal_of(world.report_ids[0])
    assert correction.appeal_id
    approve(world, correction, reviewer="admin")
    exhaust_budgets(world.installation_id, reload(correction))
    outcome = deliver(correction.id)
    assert (outcome.state, outcome.error_code) == ("applied", None)
    assert platform.state.accounts[AUTHOR] == "active"


def reversal_failed_after_upheld_appeal(world, platform):
    """The suspension's appeal is upheld (the case is closed); then its scheduled
    reversal is refused for good by the platform (a 400)."""
    original = suspended(world, platform)
    appeal_id = file_appeal(
        world.report_ids[0],
        statement="Please lift it.",
        actor=Actor("operator", world.users["moderator"]),
        installation_id=world.installation_id,
    ).appeal_id
    decide_appeal(appeal_id, outcome="upheld", rationale="The suspension stands", operator=world.user("reviewer2"))
    reversal = reversal_of(original)
    time_reaches(reversal)
    platform.state.configure(fail_next=1, fail_status=400)
    deliver(reversal.id)
    row = reload(reversal)
    assert (row.state, row.delivery_terminal) == ("failed", True)
    assert platform.state.accounts[AUTHOR] == "suspended"
    return original, row


def test_four7_failed_reversal_on_a_closed_case_can_be_retried(app, world, platform):
    """FOUR-7: after an upheld appeal closed the case, a reversal that failed for good is
    retried (a new delivery cycle; not ``action_case_no_longer_eligible``: retry checks
    the case as delivery does) and lifts the suspension."""
    _, reversal = reversal_failed_after_upheld_appeal(world, platform)
    result = retry_proposal(
        reversal.id, payload_digest=reversal.payload_digest, idempotency_key="r-1", operator=world.user("reviewer")
    )
    assert (result.state, result.delivery_cycle) == ("queued", 2)
    assert deliver(reversal.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "active"


def test_four7_failed_reversal_can_be_ended_early_under_four_eyes(app, world, platform):
    """FOUR-7, FOUR-1: after the reversal failed for good (on a case an appeal closed),
    "end now" is proposed (not refused ``action_reversal_failed``); its proposer cannot
    approve it; a second reviewer does, and it lifts the suspension. The failed
    reversal is then replaced: retrying it is refused."""
    original, failed = reversal_failed_after_upheld_appeal(world, platform)
    change = reversals.propose_change(
        original.id, kind="end_now", operator=world.user("reviewer2"), idempotency_key="end-1"
    )
    end_now = db.session.get(ActionProposal, change.proposal_id)
    assert end_now.state == "approval_required"
    with pytest.raises(ApiError) as refused:
        approve(world, end_now, reviewer="reviewer2")
    assert (refused.value.status, refused.value.code) == (403, "maker_checker_violation")
    approve(world, end_now, reviewer="reviewer")
    assert deliver(end_now.id).state == "applied"
    assert platform.state.accounts[AUTHOR] == "active"
    with pytest.raises(ApiError) as replaced:
        retry_proposal(
            failed.id, payload_digest=failed.payload_digest, idempotency_key="r-2", operator=world.user("reviewer")
        )
    assert (replaced.value.status, replaced.value.code) == (409, "action_reversal_superseded")


def test_four7_retry_and_delivery_share_one_case_predicate():
    """FOUR-7: one domain predicate says which proposals act on an appealed or closed
    case; delivery and retry both call it."""
    import inspect

    from app.domain.preconditions import acts_on_closed_case
    from app.services.lifecycle import retry
    from app.services.lifecycle.dispatch import plan

    assert acts_on_closed_case(is_correction=True, is_reversal=False)
    assert acts_on_closed_case(is_correction=False, is_reversal=True)
    assert not acts_on_closed_case(is_correction=False, is_reversal=False)
    for module in (plan, retry):
        assert "acts_on_closed_case(" in inspect.getsource(module)


def test_four7_the_page_offers_end_now_for_a_failed_reversal(client, world, platform):
    """FOUR-7: the temporary action's page says its reversal failed for good and the
    action is still in force, and offers "end now" (a four-eyes proposal)."""
    from ..builders import login

    original, failed = reversal_failed_after_upheld_appeal(world, platform)
    login(client, "reviewer2@example.com")
    html = client.get(f"/proposals/{original.id}").get_data(as_text=True)
    assert 'id="reversal-failed"' in html and "still in force" in html
    assert f'href="/proposals/{failed.id}"' in html and "Propose ending it now" in html
    token = html.split('name="csrf_token" value="')[1].split('"')[0]
    answer = client.post(
        f"/proposals/{original.id}/temporary-change",
        data={"csrf_token": token, "kind": "end_now", "idempotency_key": "page-end-1"},
    )
    assert answer.status_code == 303
    db.session.rollback()
    end_now = db.session.scalar(
        select(ActionProposal).where(
            ActionProposal.reverses_proposal_id == original.id, ActionProposal.created_by_type == "operator"
        )
    )
    assert end_now is not None and end_now.state == "approval_required"


def test_four7_failed_reversal_of_a_terminated_run_can_be_retried(app, world, platform):
    """FOUR-7: a reversal ends an action already in force, so its retry is not refused
    because the workflow run that made the action was terminated or cancelled since."""
    from app.models import WorkflowRun

    _, reversal = reversal_failed_after_upheld_appeal(world, platform)
    set_row(WorkflowRun, reversal.run_id, state="terminated")
    result = retry_proposal(
        reversal.id, payload_digest=reversal.payload_digest, idempotency_key="r-3", operator=world.user("reviewer")
    )
    assert result.state == "queued"
    assert deliver(reversal.id).state == "applied" and platform.state.accounts[AUTHOR] == "active"
