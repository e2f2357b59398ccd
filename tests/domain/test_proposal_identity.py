"""A proposal's identity, digest material and new columns (ID-1..3, PREP-4..8, COMP-2, CORR-1)."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.digests import payload_digest
from app.domain.errors import ActionError
from app.domain.proposal import identity as I

T0 = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
RUN = I.RunFacts("run_1", "ins_1", "rep_1", "wfv_1", "dec_1", T0)
CONFIG = {"action_code": "takedown", "approval_policy": {"mode": "human", "note": "x"}, "expiry_seconds": 3600}
MAPPED = {
    "idempotency_key": "takedown:dec_1",
    "target": {"reference": "post:1"},
    "payload": {"reason_code": "spam"},
    "preconditions": {"decision_code": "remove_content", "latest_decision_id": "dec_2"},
}
ORIGINAL = I.OriginalFacts(
    "p_1",
    "action:run_1:n:main:k",
    "ins_1",
    "rep_1",
    "run_1",
    "run_1:n:main",
    "wfv_1",
    {"reference": "post:1"},
    "sha256:o",
)


def workflow(**overrides):
    args = dict(
        run=RUN,
        step_run_id="run_1:takedown:main",
        node_id="takedown",
        branch_key="",
        config=CONFIG,
        mapped=MAPPED,
        component_version_id="cv_1",
        policy_version_id="pol_1",
        mode="human",
        authority_mode="assist",
        now=T0 + timedelta(seconds=5),
    )
    args.update(overrides)
    return I.workflow_proposal(**args)


def test_ids_follow_id_1():
    """ID-1: proposal id and operation id."""
    assert I.proposal_id("run_1:n:main") == "run_1:n:main:proposal"
    assert I.operation_id("run_1", "n", "", "key-1234") == "action:run_1:n:main:key-1234"
    assert I.operation_id("run_1", "n", None, "key-1234") == "action:run_1:n:main:key-1234"
    assert I.operation_id("run_1", "n", "b2", "key-1234") == "action:run_1:n:b2:key-1234"
    assert workflow(branch_key="b2").operation_id == "action:run_1:takedown:b2:takedown:dec_1"
    assert I.compensation_operation_id("op", "k") == "compensation:op:k"
    assert I.correction_operation_id("op", "apd") == "correction:op:apd"


@pytest.mark.parametrize("key", ["a" * 8, "a" * 200])
def test_idempotency_key_bounds_accepted(key):
    """PREP-4: 8..200 characters."""
    assert I.check_idempotency_key(key) == key


@pytest.mark.parametrize("key", ["a" * 7, "a" * 201, None, 12345678, ["a" * 8]])
def test_idempotency_key_refused(key):
    """PREP-4: anything else is action_idempotency_key_invalid."""
    with pytest.raises(ActionError) as caught:
        I.check_idempotency_key(key)
    assert caught.value.code == "action_idempotency_key_invalid"


@pytest.mark.parametrize("seconds", [60, 86_400, 2_678_400])
def test_expiry_seconds_in_range(seconds):
    """ID-3: an integer in 60..2,678,400."""
    assert I.expiry_seconds({"expiry_seconds": seconds}) == seconds


def test_expiry_seconds_defaults_to_a_day():
    """ID-3: 86,400 by default."""
    assert I.expiry_seconds({}) == 86_400 == I.DEFAULT_EXPIRY_SECONDS


@pytest.mark.parametrize("seconds", [59, 2_678_401, 60.0, "60", True, None])
def test_expiry_seconds_refused(seconds):
    """ID-3: action_expiry_invalid."""
    with pytest.raises(ActionError) as caught:
        I.expiry_seconds({"expiry_seconds": seconds})
    assert caught.value.code == "action_expiry_invalid"


def test_expires_at_keeps_milliseconds_only():
    """ID-3: the stored expiry equals the digested ISO text."""
    assert I.expires_at(T0, 60) == datetime(2026, 1, 2, 3, 5, 5, 678_000, tzinfo=UTC)


@pytest.mark.parametrize(
    "policy, component, authority, code",
    [
        (None, "human", "assist", "action_approval_policy_invalid"),
        ({"mode": "auto"}, "auto", "assist", "action_approval_policy_invalid"),
        ({}, "human", "assist", "action_approval_policy_invalid"),
        ({"mode": "human"}, "bounded_auto", "assist", "action_approval_policy_mismatch"),
        ({"mode": "bounded_auto"}, "bounded_auto", "assist", "action_authority_insufficient"),
    ],
)
def test_approval_mode_refusals(policy, component, authority, code):
    """PREP-6."""
    with pytest.raises(ActionError) as caught:
        I.approval_mode(policy, component, authority)
    assert caught.value.code == code


def test_approval_mode_accepted():
    """PREP-6: human anywhere acting; bounded_auto only under bounded_auto authority."""
    assert I.approval_mode({"mode": "human"}, "human", "assist") == "human"
    assert I.approval_mode({"mode": "bounded_auto"}, "bounded_auto", "bounded_auto") == "bounded_auto"


def test_digest_material_covers_the_id_2_fields():
    """ID-2: exactly the eleven fields, expires_at as ISO-8601 UTC."""
    material = I.digest_material(
        action_id="a",
        action_code="c",
        target={"t": 1},
        payload={"p": 1},
        preconditions={},
        component_version_id="cv",
        expires_at=T0,
        installation_id="ins",
        workflow_version_id="wfv",
        policy_version_id="pol",
    )
    assert material == {
        "schema_version": "1",
        "action_id": "a",
        "action_code": "c",
        "target": {"t": 1},
        "payload": {"p": 1},
        "preconditions": {},
        "component_version_id": "cv",
        "workflow_version_id": "wfv",
        "policy_version_id": "pol",
        "expires_at": "2026-01-02T03:04:05.678Z",
        "installation_id": "ins",
    }


def test_compensation_material_covers_the_original_instead_of_versions():
    """COMP-2: compensates_proposal_id replaces the workflow and policy versions."""
    material = I.digest_material(
        action_id="a",
        action_code="c",
        target={},
        payload={},
        preconditions={},
        component_version_id="cv",
        expires_at=T0,
        installation_id="ins",
        workflow_version_id="wfv",
        compensates_proposal_id="p_1",
    )
    assert material["compensates_proposal_id"] == "p_1"
    assert "workflow_version_id" not in material and "policy_version_id" not in material


def test_workflow_proposal_needing_a_person():
    """PREP-8, ID-1..3: approval_required, a task, the digest of its material."""
    new = workflow()
    assert (new.id, new.operation_id) == ("run_1:takedown:main:proposal", "action:run_1:takedown:main:takedown:dec_1")
    assert (new.state, new.needs_person, new.task_id, new.next_attempt_at) == (
        "approval_required",
        True,
        "run_1:takedown:main:action-approval-task",
        None,
    )
    assert new.expires_at == datetime(2026, 1, 2, 4, 4, 5, 678_000, tzinfo=UTC)
    assert new.approval_policy == {"mode": "human", "note": "x", "expires_at": "2026-01-02T04:04:05.678Z"}
    assert (new.created_by_type, new.created_by_id, new.created_at) == ("system", "run_1", T0 + timedelta(seconds=5))
    assert (new.report_id, new.run_id, new.step_run_id, new.installation_id) == (
        "rep_1",
        "run_1",
        "run_1:takedown:main",
        "ins_1",
    )
    assert new.decision_id == "dec_2"  # the pinned decision
    assert (new.action_code, new.target, new.payload, new.preconditions) == (
        "takedown",
        MAPPED["target"],
        MAPPED["payload"],
        MAPPED["preconditions"],
    )
    assert (new.component_version_id, new.workflow_version_id, new.policy_version_id) == ("cv_1", "wfv_1", "pol_1")
    assert (new.approval_mode, new.authority_mode, new.appeal_id, new.compensates_proposal_id) == (
        "human",
        "assist",
        None,
        None,
    )
    material = I.digest_material(
        action_id=new.id,
        action_code="takedown",
        target=MAPPED["target"],
        payload=MAPPED["payload"],
        preconditions=MAPPED["preconditions"],
        component_version_id="cv_1",
        expires_at=new.expires_at,
        installation_id="ins_1",
        workflow_version_id="wfv_1",
        policy_version_id="pol_1",
    )
    assert new.payload_digest == payload_digest(material)
    assert new.audit_details == {
        "action_code": "takedown",
        "payload_digest": new.payload_digest,
        "approval_mode": "human",
        "operation_id": new.operation_id,
        "expires_at": "2026-01-02T04:04:05.678Z",
    }


def test_bounded_auto_proposal_is_queued_and_due():
    """PREP-8: bounded_auto proposals are queued and due at once, without a task."""
    now = T0 + timedelta(seconds=5)
    new = workflow(mode="bounded_auto", authority_mode="bounded_auto")
    assert (new.state, new.needs_person, new.task_id, new.next_attempt_at) == ("queued", False, None, now)


def test_unpinned_proposal_enforces_its_runs_decision():
    """PREP-5: without a pinned decision, the decision that started the run."""
    new = workflow(mapped={**MAPPED, "preconditions": None})
    assert (new.preconditions, new.decision_id) == ({}, "dec_1")
    assert I.enforced_decision_id({}, None) is None
    assert I.enforced_decision_id({"latest_decision_id": 7}, "dec_1") is None


def test_the_digest_changes_with_every_covered_field():
    """ID-2: any change of a covered field changes the digest."""
    base = workflow().payload_digest
    assert workflow(mapped={**MAPPED, "payload": {"reason_code": "other"}}).payload_digest != base
    assert workflow(mapped={**MAPPED, "target": {"reference": "post:2"}}).payload_digest != base
    assert workflow(component_version_id="cv_2").payload_digest != base
    assert workflow(policy_version_id="pol_2").payload_digest != base
    assert workflow(step_run_id="run_1:other:main").payload_digest != base
    assert workflow(config={**CONFIG, "expiry_seconds": 60}).payload_digest != base
    assert workflow(now=T0 + timedelta(hours=1)).payload_digest == base  # creation time is not covered


@pytest.mark.parametrize(
    "field, value, code",
    [
        ("target", "post:1", "action_target_invalid"),
        ("payload", None, "action_payload_invalid"),
        ("preconditions", ["x"], "action_preconditions_invalid"),
        ("idempotency_key", "short", "action_idempotency_key_invalid"),
    ],
)
def test_mapped_values_must_be_objects(field, value, code):
    """PREP-4: target, payload and preconditions are objects."""
    with pytest.raises(ActionError) as caught:
        workflow(mapped={**MAPPED, field: value})
    assert caught.value.code == code


def test_mapped_objects_copies_preconditions():
    """PREP-5: pinning a decision never edits the mapping's own value."""
    raw = {"decision_code": "x"}
    _, _, preconditions = I.mapped_objects({"target": {}, "payload": {}, "preconditions": raw})
    preconditions["latest_decision_id"] = "dec"
    assert raw == {"decision_code": "x"}


def test_compensation_proposal():
    """COMP-2: human approval, 24 h, operation id, proposer, digest covering the original."""
    now = T0
    new = I.compensation_proposal(
        original=ORIGINAL,
        token="abc",
        idempotency_key="k1",
        action_code="restore",
        target={"reference": "post:1"},
        payload={"reason_code": "mistake"},
        preconditions={},
        component_version_id="cv_r",
        policy_version_id="pol",
        proposer_id="op_admin",
        now=now,
    )
    assert (new.id, new.operation_id, new.task_id) == (
        "cmp_abc",
        "compensation:action:run_1:n:main:k:k1",
        "cmp_abc:approval-task",
    )
    assert (new.state, new.approval_mode, new.authority_mode) == ("approval_required", "human", "assist")
    assert (new.created_by_type, new.created_by_id, new.compensates_proposal_id) == ("operator", "op_admin", "p_1")
    assert new.expires_at - now == timedelta(hours=24, microseconds=-901)
    assert new.approval_policy == {"mode": "human", "expires_at": "2026-01-03T03:04:05.678Z", "compensation": True}
    assert (new.run_id, new.step_run_id, new.report_id, new.workflow_version_id) == (
        "run_1",
        "run_1:n:main",
        "rep_1",
        "wfv_1",
    )
    assert (new.policy_version_id, new.created_at, new.installation_id) == ("pol", now, "ins_1")
    assert (new.component_version_id, new.action_code, new.payload) == ("cv_r", "restore", {"reason_code": "mistake"})
    material = I.digest_material(
        action_id="cmp_abc",
        action_code="restore",
        target={"reference": "post:1"},
        payload={"reason_code": "mistake"},
        preconditions={},
        component_version_id="cv_r",
        expires_at=new.expires_at,
        installation_id="ins_1",
        compensates_proposal_id="p_1",
    )
    assert new.payload_digest == payload_digest(material)
    assert new.audit_details == {
        "action_code": "restore",
        "payload_digest": new.payload_digest,
        "compensates_proposal_id": "p_1",
    }


def test_correction_proposal():
    """CORR-1: the original's target, preconditions naming the appeal, 7 days from the appeal decision."""
    new = I.correction_proposal(
        correction_id="cor_1",
        original=ORIGINAL,
        appeal_id="apl_1",
        appeal_decision_id="apd_1",
        appeal_decision_at=T0,
        contested_decision_id="dec_1",
        action_code="restore",
        payload={"reason_code": "appeal_reversed"},
        component_version_id="cv_r",
        policy_version_id="pol",
        now=T0 + timedelta(seconds=1),
    )
    assert (new.id, new.operation_id, new.task_id) == (
        "cor_1:proposal",
        "correction:action:run_1:n:main:k:apd_1",
        "cor_1:proposal:approval-task",
    )
    assert new.target == ORIGINAL.target and new.preconditions == {
        "appeal_decision_id": "apd_1",
        "original_payload_digest": "sha256:o",
        "latest_decision_id": "dec_1",
    }
    assert (new.appeal_id, new.decision_id, new.created_by_id) == ("apl_1", "dec_1", "appeal-decision:apd_1")
    assert (new.state, new.approval_mode, new.created_by_type) == ("approval_required", "human", "system")
    assert new.expires_at == datetime(2026, 1, 9, 3, 4, 5, 678_000, tzinfo=UTC)
    assert new.approval_policy == {
        "mode": "human",
        "expires_at": "2026-01-09T03:04:05.678Z",
        "appeal_correction": "cor_1",
    }
    assert (new.installation_id, new.report_id, new.run_id, new.step_run_id) == (
        "ins_1",
        "rep_1",
        "run_1",
        "run_1:n:main",
    )
    assert (new.action_code, new.payload, new.component_version_id) == (
        "restore",
        {"reason_code": "appeal_reversed"},
        "cv_r",
    )
    assert (new.workflow_version_id, new.policy_version_id, new.authority_mode, new.created_at) == (
        "wfv_1",
        "pol",
        "assist",
        T0 + timedelta(seconds=1),
    )
    assert new.audit_details["appeal_correction_id"] == "cor_1"
    assert new.audit_details["operation_id"] == new.operation_id and new.audit_details["approval_mode"] == "human"
    assert new.payload_digest.startswith("sha256:") and new.audit_details["payload_digest"] == new.payload_digest



def test_every_proposal_following_an_original_takes_its_case_run_step_and_version():
    """COMP-2, CORR-1, TEMP-2: a compensation, an appeal correction and a reversal are
    built by one constructor (`following_proposal`), so each carries the original's
    installation, report, run, step run and workflow version."""
    from app.domain.proposal import temporary as T

    plan = {"component_version_id": "cv_u", "action_code": "unsuspend", "target": {}, "payload": {}}
    original = replace(ORIGINAL, temporary={"duration_seconds": 3600, "reversal": plan}, approval_mode="human")
    compensation, correction = compensation_of(original), correction_of(original)
    for new in (compensation, correction, T.reversal_proposal(original, T0, "apv_1")):
        assert (new.installation_id, new.report_id, new.run_id, new.step_run_id, new.workflow_version_id) == (
            "ins_1",
            "rep_1",
            "run_1",
            "run_1:n:main",
            "wfv_1",
        )
    own = {f.name: getattr(compensation, f.name) for f in fields(compensation) if f.name not in FOLLOWED}
    direct = I.following_proposal(original, **{**own, "payload_digest": "", "audit_details": {}})
    assert direct.payload_digest == compensation.payload_digest


def compensation_of(original, **changes):
    """A compensation of `original` (COMP-2), with `changes` to the defaults."""
    args = dict(
        original=original,
        token="t",
        idempotency_key="k1",
        action_code="restore",
        target={},
        payload={},
        preconditions={},
        component_version_id="cv_r",
        policy_version_id=None,
        proposer_id="op",
        now=T0,
    )
    return I.compensation_proposal(**{**args, **changes})


def correction_of(original, **changes):
    """An appeal correction of `original` (CORR-1), with `changes` to the defaults."""
    args = dict(
        correction_id="cor_1",
        original=original,
        appeal_id="apl_1",
        appeal_decision_id="apd_1",
        appeal_decision_at=T0,
        contested_decision_id="dec_1",
        action_code="restore",
        payload={},
        component_version_id="cv_r",
        policy_version_id=None,
        now=T0,
    )
    return I.correction_proposal(**{**args, **changes})


FOLLOWED = ("installation_id", "report_id", "run_id", "step_run_id", "workflow_version_id")
