"""The rules of temporary and scheduled actions, as pure functions (TEMP-1..4)."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.digests import payload_digest
from app.domain.errors import ActionError
from app.domain.proposal import temporary as T
from app.domain.proposal.delivery import Delivery
from app.domain.proposal.identity import NewProposal, OriginalFacts, RunFacts, digest_material, workflow_proposal
from app.domain.states import Move, ProposalState

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
    facts = OriginalFacts(
        id="p1",
        operation_id="action:run_1:suspend:main:k",
        installation_id="ins_1",
        report_id="rep_1",
        run_id="run_1",
        step_run_id="run_1:suspend:main",
        workflow_version_id="wfv_1",
        target=TARGET,
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
    assert change.expect == {"state": "queued", "delivery_attempt_count": 0, "delivery_terminal": False, "accepted_at": None}


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


# --- Exact values (each field a reviewer, a worker or the audit log reads) -------------

REVERSAL = {**PLAN["reversal"], "target": TARGET}
SEVEN_DAYS = NOW + timedelta(days=7)


def test_temp1_a_node_setting_alone_is_the_config():
    """TEMP-1: with no component settings, the node's are taken as they are."""
    assert T.temporary_config(None, {"duration_seconds": 120}) == {"duration_seconds": 120}
    assert T.temporary_config({"duration_seconds": 60}, {"reversal": REVERSAL}) == {
        "duration_seconds": 60,
        "reversal": REVERSAL,
    }


def test_temp1_the_plan_holds_exactly_what_was_configured():
    """TEMP-1: the duration, component, code, target and payload are kept as given; a
    missing payload is an empty object."""
    other = {"reference": "user:2", "kind": "account"}
    config = {"duration_seconds": 3600.0, "reversal": {**PLAN["reversal"], "target": other}}
    assert T.plan(config, TARGET) == T.TemporaryPlan(
        3600, T.ReversalPlan("cmv_restore", "restore", other, {"reason_code": "end"})
    )
    bare = T.plan({"duration_seconds": 60, "reversal": {"component_version_id": "c", "action_code": "r"}}, TARGET)
    assert bare == T.TemporaryPlan(60, T.ReversalPlan("c", "r", TARGET, {}))
    assert bare.as_dict() == {
        "duration_seconds": 60,
        "reversal": {"component_version_id": "c", "action_code": "r", "target": TARGET, "payload": {}},
    }


@pytest.mark.parametrize("length", [1, 200])
def test_temp1_reversal_action_codes_of_1_to_200_characters(length):
    """TEMP-1: the bounds of the reversal's action code are inclusive."""
    config = {"duration_seconds": 60, "reversal": {"component_version_id": "c", "action_code": "a" * length}}
    assert T.plan(config, TARGET).reversal.action_code == "a" * length


@pytest.mark.parametrize(
    "reversal",
    [
        {"component_version_id": "", "action_code": "restore"},
        {"component_version_id": 7, "action_code": "restore"},
        {"component_version_id": "c", "action_code": "a" * 201},
        {"component_version_id": "c", "action_code": 5},
        {"component_version_id": "c", "action_code": "restore", "target": "user:1"},
    ],
)
def test_temp1_a_reversal_without_a_component_or_a_sane_code_is_refused(reversal):
    """TEMP-1: an empty or non-text component, a code past 200 characters or not text,
    a target that is not an object: ``action_reversal_invalid``."""
    with pytest.raises(ActionError) as refused:
        T.plan({"duration_seconds": 600, "reversal": reversal}, TARGET)
    assert refused.value.code == "action_reversal_invalid"


def test_temp1_a_plan_with_a_bad_duration_is_refused_before_the_reversal():
    """TEMP-1: the duration is checked too: ``action_duration_invalid``."""
    with pytest.raises(ActionError) as refused:
        T.plan({"duration_seconds": 30, "reversal": REVERSAL}, TARGET)
    assert refused.value.code == "action_duration_invalid"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (-5, "0 seconds"),
        (1, "1 second"),
        (2, "2 seconds"),
        (61, "1 minute 1 second"),
        (90_061, "1 day 1 hour"),
        (2 * 86_400 + 59, "2 days 59 seconds"),
    ],
)
def test_temp1_durations_read_in_their_two_largest_units(seconds, text):
    """TEMP-1: what the reviewer reads; nothing or less is "0 seconds"."""
    assert T.format_duration(seconds) == text


def _digest_of(proposal):
    """The digest ID-2/TEMP-1 give for the proposal's fields, recomputed by hand."""
    return payload_digest(
        digest_material(
            action_id=proposal.id,
            action_code="restore",
            target=TARGET,
            payload={"reason_code": "end"},
            preconditions={},
            component_version_id="cmv_restore",
            expires_at=proposal.expires_at,
            installation_id="ins_1",
            workflow_version_id="wfv_1",
            policy_version_id="pol_1",
            not_before=proposal.not_before,
            reverses_proposal_id="p1",
        )
    )


def test_temp2_the_scheduled_reversal_field_by_field():
    """TEMP-2: the reversal acts with the plan's component, code, target and payload,
    under the action's run, versions, decision and modes; it is queued for applied +
    duration, made by the system, authorized by the action's approval and digest, and
    stays authorized 30 days past its time."""
    original = _facts(authority_mode="bounded_auto", approval_mode="bounded_auto", policy_version_id="pol_1")
    applied = NOW + timedelta(minutes=3, milliseconds=250)
    due = applied + timedelta(days=7)
    expiry = due + timedelta(days=30)
    reversal = T.reversal_proposal(original, applied, None)
    authorized = {"authorized_by_approval_id": None, "authorized_by_digest": "sha256:" + "0" * 64}
    digest = _digest_of(reversal)
    assert asdict(reversal) == asdict(
        NewProposal(
            id="p1:reversal",
            operation_id="reversal:action:run_1:suspend:main:k",
            installation_id="ins_1",
            report_id="rep_1",
            run_id="run_1",
            step_run_id="run_1:suspend:main",
            action_code="restore",
            target=TARGET,
            payload={"reason_code": "end"},
            preconditions={},
            component_version_id="cmv_restore",
            workflow_version_id="wfv_1",
            policy_version_id="pol_1",
            authority_mode="bounded_auto",
            approval_mode="bounded_auto",
            approval_policy={
                "mode": "bounded_auto",
                "expires_at": "2027-01-07T12:03:00.250Z",
                "reversal": authorized,
            },
            expires_at=expiry,
            state="queued",
            created_by_type="system",
            created_by_id="reversal-of:p1",
            created_at=applied,
            payload_digest=digest,
            decision_id="dec_1",
            next_attempt_at=due,
            not_before=due,
            reverses_proposal_id="p1",
            audit_details={
                "action_code": "restore",
                "payload_digest": digest,
                "operation_id": "reversal:action:run_1:suspend:main:k",
                "reverses_proposal_id": "p1",
                "not_before": "2026-12-08T12:03:00.250Z",
                **authorized,
            },
        )
    )


def _replacement(kind, new_end, **changes):
    return T.replacement_proposal(
        _facts(policy_version_id="pol_1", **changes),
        kind=kind,
        new_end=new_end,
        token="tok",
        idempotency_key="key-1",
        operator_id="op_1",
        now=NOW,
    )


def _expected_replacement(kind, proposal, *, not_before, expiry, expiry_text, not_before_text):
    digest = _digest_of(proposal)
    operation = f"reversal:action:run_1:suspend:main:k:{kind}:key-1"
    return NewProposal(
        id="rvs_tok",
        operation_id=operation,
        installation_id="ins_1",
        report_id="rep_1",
        run_id="run_1",
        step_run_id="run_1:suspend:main",
        action_code="restore",
        target=TARGET,
        payload={"reason_code": "end"},
        preconditions={},
        component_version_id="cmv_restore",
        workflow_version_id="wfv_1",
        policy_version_id="pol_1",
        authority_mode="assist",
        approval_mode="human",
        approval_policy={"mode": "human", "expires_at": expiry_text, "temporary_change": kind},
        expires_at=expiry,
        state="approval_required",
        created_by_type="operator",
        created_by_id="op_1",
        created_at=NOW,
        payload_digest=digest,
        decision_id="dec_1",
        not_before=not_before,
        reverses_proposal_id="p1",
        task_id="rvs_tok:approval-task",
        audit_details={
            "action_code": "restore",
            "payload_digest": digest,
            "operation_id": operation,
            "reverses_proposal_id": "p1",
            "change": kind,
            "not_before": not_before_text,
        },
    )


def test_temp3_end_now_field_by_field():
    """TEMP-3: "end now" is a reversal with no not_before, under four-eyes (assist,
    human approval, operator-made: FOUR-1), that waits 7 days for its checker; the
    original's automation modes are not inherited."""
    end_now = _replacement("end_now", None, authority_mode="bounded_auto", approval_mode="bounded_auto")
    expected = _expected_replacement(
        "end_now",
        end_now,
        not_before=None,
        expiry=NOW + timedelta(days=7),
        expiry_text="2026-12-08T12:00:00.000Z",
        not_before_text=None,
    )
    assert asdict(end_now) == asdict(expected)
    assert end_now.needs_person


def test_temp3_end_now_is_never_scheduled_whatever_end_it_is_given():
    """TEMP-3: "end now" is sent as soon as it is approved: a `new_end` passed along
    sets neither its not_before nor its expiry."""
    end_now = _replacement("end_now", NOW + timedelta(days=3))
    assert (end_now.not_before, end_now.expires_at) == (None, NOW + timedelta(days=7))
    assert end_now.audit_details["not_before"] is None


def test_temp3_extend_field_by_field():
    """TEMP-3: "extend" is a reversal at the new end, under four-eyes, authorized until
    30 days past that end (as the scheduled reversal is, TEMP-2)."""
    new_end = NOW + timedelta(days=10, milliseconds=500)
    extend = _replacement("extend", new_end)
    expected = _expected_replacement(
        "extend",
        extend,
        not_before=new_end,
        expiry=new_end + timedelta(days=30),
        expiry_text="2027-01-10T12:00:00.500Z",
        not_before_text="2026-12-11T12:00:00.500Z",
    )
    assert asdict(extend) == asdict(expected)


def test_temp3_extension_bounds_are_inclusive():
    """TEMP-3: a new end exactly a minute away, or exactly 366 days after the action was
    applied, is allowed; one microsecond less or more is ``action_duration_invalid``."""
    applied = NOW - timedelta(days=1)
    minute = NOW + timedelta(seconds=60)
    limit = applied + timedelta(days=366)
    tick = timedelta(microseconds=1)
    assert T.replacement_refusal("extend", applied, minute, NOW) is None
    assert T.replacement_refusal("extend", applied, limit, NOW) is None
    assert T.replacement_refusal("extend", applied, minute - tick, NOW) == "action_duration_invalid"
    assert T.replacement_refusal("extend", applied, limit + tick, NOW) == "action_duration_invalid"
    assert T.replacement_refusal("extend", applied, None, NOW) == "action_duration_invalid"
    assert T.replacement_refusal("end_now", applied, None, NOW) is None
    assert T.replacement_refusal("extend", None, minute, NOW) == "action_not_temporary"


def test_temp4_cancelling_sets_exactly_the_terminal_columns():
    """TEMP-4: a cancelled proposal is terminal, keeps no lease, and records why (the
    code given, ``action_cancelled`` by default)."""
    d = Delivery(state="approved", expires_at=NOW + timedelta(days=1), not_before=NOW + timedelta(hours=1))
    assert T.cancel(d).values == {
        "delivery_terminal": True,
        "lease_expires_at": None,
        "last_error_code": "action_cancelled",
    }
    undone = T.cancel(d, T.UNDONE)
    assert undone.values["last_error_code"] == "action_reversal_undone_by_correction"
    assert undone.expect == {"state": "approved", "delivery_attempt_count": 0, "delivery_terminal": False, "accepted_at": None}
    assert T.cancel(replace(d, delivery_terminal=True)) is None


def test_temp4_cancel_refused_once_accepted_or_out_of_the_cancellable_states():
    """TEMP-4: accepted by the platform, or claimed (applying): ``action_already_sent``."""
    d = Delivery(state="approval_required", expires_at=NOW + timedelta(days=1))
    assert T.cancel_refusal(d, NOW, is_reversal=False) is None
    assert T.cancel_refusal(replace(d, accepted_at=NOW), NOW, is_reversal=False) == "action_already_sent"
    assert T.cancel_refusal(replace(d, state="applying"), NOW, is_reversal=False) == "action_already_sent"


def test_temp2_overdue_only_past_five_minutes():
    """TEMP-2: exactly five minutes late is not yet overdue; a second more is."""
    assert not T.is_overdue(NOW - timedelta(minutes=5), NOW)
    assert T.is_overdue(NOW - timedelta(minutes=5, seconds=1), NOW)
    assert not T.is_overdue(None, NOW)


@pytest.mark.parametrize(
    "changes",
    [{"delivery_terminal": True}, {"accepted_at": NOW}, {"delivery_attempt_count": 1}, {"state": "applying"}],
)
def test_temp4_the_refusal_and_the_cancel_agree_on_what_was_sent(changes):
    """TEMP-4: one rule for "nothing was sent yet": the refusal an operator sees and the
    guarded cancel never disagree (the refusal read `accepted_at`, the cancel
    `delivery_terminal`)."""
    d = replace(Delivery(state="queued", expires_at=NOW + timedelta(days=1), not_before=NOW), **changes)
    refused = T.cancel_refusal(d, d.not_before, is_reversal=False)
    assert refused == "action_already_sent"
    assert T.cancel(d) is None
    assert not T.unsent(d)


def test_temp3_the_active_reversal_and_a_waiting_schedule():
    """TEMP-3: the reversal that will end the action is neither cancelled, rejected nor
    awaiting approval; TEMP-4: a scheduled proposal waits while nothing was sent."""
    active = {state.value for state in ProposalState if T.is_active_reversal(state)}
    assert active == {"approved", "queued", "applying", "applied", "failed", "compensation_required"}
    d = Delivery(state="queued", expires_at=NOW + timedelta(days=1), not_before=NOW)
    assert T.waits_scheduled(d) and not T.waits_scheduled(replace(d, not_before=None))
    assert not T.waits_scheduled(replace(d, delivery_attempt_count=1))
    assert T.change_refusal("extend", None) == "action_temporary_ended"


@pytest.mark.parametrize(
    "is_correction, is_reversal, draws", [(False, False, True), (True, False, False), (False, True, False), (True, True, False)]
)
def test_dlv3_only_a_delivery_that_undoes_nothing_draws_on_the_budgets(is_correction, is_reversal, draws):
    """DLV-3, FOUR-7: a reversal or an appeal correction is never refused for lack of budget."""
    assert T.draws_on_budget(is_correction=is_correction, is_reversal=is_reversal) is draws


def test_dsa4_a_notice_never_waits_for_budget():
    """DSA-4, FOUR-7: a restriction's notice restricts nothing and is owed once the
    restriction applied: it draws on no budget."""
    assert T.draws_on_budget(is_correction=False, is_reversal=False, is_notice=True) is False
