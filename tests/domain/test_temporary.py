"""The rules of temporary and scheduled actions, as pure functions (TEMP-1..4)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.errors import ActionError
from app.domain.proposal import temporary as T
from app.domain.proposal.delivery import Delivery
from app.domain.proposal.identity import RunFacts, digest_material, workflow_proposal
from app.domain.states import Move

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PLAN = {
    "duration_seconds": 7 * 86_400,
    "reversal": {"component_version_id": "cmv_restore", "action_code": "restore", "payload": {"reason_code": "end"}},
}
TARGET = {"reference": "user:1", "kind": "account"}


@pytest.mark.parametrize("value", [60, 61, 86_400, 366 * 86_400, 604800.0])
def test_temp1_durations_in_bounds(value):
    """TEMP-1: whole seconds from 60 s to 366 days (an integer-valued number too)."""
    assert T.check_duration(value) == int(value)


@pytest.mark.parametrize("value", [59, 0, -60, 366 * 86_400 + 1, 60.5, "3600", True, None, [60]])
def test_temp1_durations_out_of_bounds_are_a_clear_error(value):
    """TEMP-1: anything else is ``action_duration_invalid``."""
    with pytest.raises(ActionError) as refused:
        T.check_duration(value)
    assert refused.value.code == "action_duration_invalid"


def test_temp1_node_settings_over_the_component_and_the_mapping_over_both():
    """TEMP-1: the node's temporary settings override the component's; the input
    mapping may compute the duration."""
    component = {"duration_seconds": 3600, "reversal": PLAN["reversal"]}
    assert T.temporary_config(None, None) is None
    assert T.temporary_config(component, {"duration_seconds": 120})["duration_seconds"] == 120
    assert T.temporary_config(component, None, 900)["duration_seconds"] == 900
    with pytest.raises(ActionError) as refused:
        T.temporary_config("not an object", None)
    assert refused.value.code == "action_reversal_invalid"


def test_temp1_the_plan_defaults_the_reversal_target_to_the_actions():
    """TEMP-1: the reversal acts on the action's own target unless it names one."""
    plan = T.plan(PLAN, TARGET)
    assert plan.reversal.target == TARGET and plan.reversal.action_code == "restore"
    assert T.TemporaryPlan.from_dict(plan.as_dict()) == plan


@pytest.mark.parametrize(
    "reversal",
    [
        None,
        {},
        {"component_version_id": "cmv", "action_code": ""},
        {"component_version_id": "cmv", "action_code": "x", "payload": []},
    ],
)
def test_temp1_a_reversal_that_cannot_act_is_refused(reversal):
    """TEMP-1: ``action_reversal_invalid``."""
    with pytest.raises(ActionError) as refused:
        T.plan({"duration_seconds": 600, "reversal": reversal}, TARGET)
    assert refused.value.code == "action_reversal_invalid"


def _proposal(temporary=None, config=None, mapped=None):
    run = RunFacts("run_1", "ins_1", "rep_1", "wfv_1", "dec_1", NOW)
    return workflow_proposal(
        run=run,
        step_run_id="run_1:suspend:main",
        node_id="suspend",
        branch_key=None,
        config={"action_code": "suspend_account", "approval_policy": {"mode": "human"}, **(config or {})},
        mapped={"idempotency_key": "suspend:dec_1", "target": TARGET, "payload": {"a": 1}, **(mapped or {})},
        component_version_id="cmv_suspend",
        policy_version_id=None,
        mode="human",
        authority_mode="assist",
        now=NOW,
        temporary=temporary,
    )


def test_temp1_the_digest_covers_the_duration_and_the_reversal():
    """TEMP-1: change the duration, the reversal's action or its payload and the digest
    changes; a permanent action's digest is the one ID-2 alone gives."""
    permanent = _proposal()
    seven_days = _proposal(PLAN)
    digests = {
        permanent.payload_digest,
        seven_days.payload_digest,
        _proposal({**PLAN, "duration_seconds": 8 * 86_400}).payload_digest,
        _proposal({**PLAN, "reversal": {**PLAN["reversal"], "action_code": "other"}}).payload_digest,
        _proposal({**PLAN, "reversal": {**PLAN["reversal"], "payload": {"reason_code": "x"}}}).payload_digest,
    }
    assert len(digests) == 5
    material = digest_material(
        action_id=permanent.id,
        action_code=permanent.action_code,
        target=permanent.target,
        payload=permanent.payload,
        preconditions=permanent.preconditions,
        component_version_id=permanent.component_version_id,
        expires_at=permanent.expires_at,
        installation_id=permanent.installation_id,
        workflow_version_id="wfv_1",
    )
    assert "temporary" not in material and "not_before" not in material
    assert seven_days.temporary == PLAN


def test_temp1_the_reviewer_reads_both_in_one_line():
    """TEMP-1: "suspend_account for 7 days, then restore"."""
    assert T.summary("suspend_account", PLAN) == "suspend_account for 7 days, then restore"
    assert T.format_duration(180) == "3 minutes" and T.format_duration(90_000) == "1 day 1 hour"


def _facts(**changes):
    facts = T.TemporaryFacts(
        id="p1",
        operation_id="action:run_1:suspend:main:k",
        installation_id="ins_1",
        report_id="rep_1",
        run_id="run_1",
        step_run_id="run_1:suspend:main",
        workflow_version_id="wfv_1",
        policy_version_id=None,
        decision_id="dec_1",
        approval_mode="human",
        authority_mode="assist",
        temporary={**PLAN, "reversal": {**PLAN["reversal"], "target": TARGET}},
        payload_digest="sha256:" + "0" * 64,
    )
    return replace(facts, **changes)


def test_temp2_the_reversal_is_due_at_applied_time_plus_duration_and_authorized():
    """TEMP-2: queued for applied + duration, its own digest, naming the approval and the
    original it reverses; one per operation."""
    reversal = T.reversal_proposal(_facts(), NOW, "apv_1")
    assert (reversal.state, reversal.not_before, reversal.next_attempt_at) == (
        "queued",
        NOW + timedelta(days=7),
        NOW + timedelta(days=7),
    )
    assert reversal.reverses_proposal_id == "p1" and reversal.operation_id == "reversal:action:run_1:suspend:main:k"
    assert reversal.approval_policy["reversal"] == {
        "authorized_by_approval_id": "apv_1",
        "authorized_by_digest": "sha256:" + "0" * 64,
    }
    assert reversal.expires_at > reversal.not_before  # it stays authorized well past its time
    assert reversal.payload_digest != _facts().payload_digest
    assert T.reversal_proposal(_facts(), NOW, "apv_1").payload_digest == reversal.payload_digest


def test_temp3_end_now_and_extend_are_new_proposals_needing_a_person():
    """TEMP-3: operator-made, approval required, linked to the original."""
    end_now = T.replacement_proposal(
        _facts(), kind="end_now", new_end=None, token="t", idempotency_key="k", operator_id="op_1", now=NOW
    )
    assert (end_now.state, end_now.not_before, end_now.created_by_id) == ("approval_required", None, "op_1")
    later = NOW + timedelta(days=10)
    extend = T.replacement_proposal(
        _facts(), kind="extend", new_end=later, token="u", idempotency_key="k", operator_id="op_1", now=NOW
    )
    assert extend.not_before == later and extend.reverses_proposal_id == "p1"
    assert T.replacement_refusal("extend", NOW, NOW + timedelta(seconds=30), NOW) == "action_duration_invalid"
    assert T.replacement_refusal("extend", NOW, NOW + timedelta(days=367), NOW) == "action_duration_invalid"
    assert T.replacement_refusal("end_now", None, None, NOW) == "action_not_temporary"
    assert T.replacement_refusal("shorten", NOW, None, NOW) == "action_temporary_change_invalid"


def test_temp4_not_before_is_checked_against_the_authorization():
    """TEMP-4: ISO-8601 UTC before the expiry; else ``action_not_before_invalid``."""
    expiry = NOW + timedelta(days=1)
    assert T.check_not_before(None, NOW, expiry) is None
    assert T.check_not_before("2026-12-01T13:00:00Z", NOW, expiry) == NOW + timedelta(hours=1)
    for bad in ("2026-12-03T00:00:00Z", "tomorrow", 5):
        with pytest.raises(ActionError) as refused:
            T.check_not_before(bad, NOW, expiry)
        assert refused.value.code == "action_not_before_invalid"
    assert T.scheduled_time({"delay_seconds": 600}, {}, NOW) == "2026-12-01T12:10:00.000Z"
    with pytest.raises(ActionError):
        T.scheduled_time({"delay_seconds": 0}, {}, NOW)


def test_temp4_a_node_delay_gives_the_proposal_its_not_before_in_the_digest():
    """TEMP-4: the digest covers not_before; preparing again gives the same digest."""
    scheduled = _proposal(config={"delay_seconds": 600})
    assert scheduled.not_before == NOW + timedelta(minutes=10)
    assert scheduled.payload_digest != _proposal().payload_digest
    assert scheduled.payload_digest == _proposal(config={"delay_seconds": 600}).payload_digest


def test_temp4_cancel_only_until_something_is_sent():
    """TEMP-4: cancellable while nothing was claimed; a reversal is never cancelled by hand."""
    d = Delivery(state="queued", expires_at=NOW + timedelta(days=1), not_before=NOW + timedelta(hours=1))
    assert T.cancel_refusal(d, d.not_before, is_reversal=False) is None
    assert T.cancel_refusal(d, None, is_reversal=False) == "action_not_scheduled"
    assert T.cancel_refusal(d, d.not_before, is_reversal=True) == "action_reversal_not_cancellable"
    sent = replace(d, delivery_attempt_count=1)
    assert T.cancel_refusal(sent, d.not_before, is_reversal=False) == "action_already_sent"
    assert T.cancel(sent) is None and T.cancel(replace(d, state="applying")) is None
    change = T.cancel(d)
    assert change.move == Move.CANCEL_SCHEDULED and change.values["delivery_terminal"] is True
    assert change.expect == {"state": "queued", "delivery_attempt_count": 0, "delivery_terminal": False}


def test_temp2_overdue_and_time_left():
    """TEMP-2, TEMP-4: the countdown and the five-minute overdue mark."""
    assert T.time_left(NOW + timedelta(minutes=2), NOW) == 120 and T.time_left(None, NOW) is None
    assert T.time_left(NOW - timedelta(minutes=2), NOW) == 0
    assert not T.is_overdue(NOW - timedelta(minutes=4), NOW) and T.is_overdue(NOW - timedelta(minutes=6), NOW)


def test_temp1_a_workflow_node_with_a_bad_duration_is_refused_when_saved():
    """TEMP-1: graph_errors names the node whose temporary duration is out of bounds."""
    from app.domain.workflow import graph_errors

    def graph(temporary):
        node = {"type": "action", "config": {"temporary": temporary}, "input_mapping": {}, "next": {}}
        return {"trigger": {"decision_codes": ["x"]}, "start": "n", "nodes": {"n": node}}

    assert graph_errors(graph(PLAN)) == []
    assert graph_errors(graph({"duration_seconds": 30})) == [
        "Node 'n': config.temporary.duration_seconds must be 60 s to 366 days."
    ]
    assert graph_errors(graph("7 days")) == ["Node 'n': config.temporary must be an object."]
