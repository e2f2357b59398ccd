"""Pure rules: backoff (DLV-6), preconditions (PRE-1, PRE-2), maker/checker
(APPR-4), digests (ID-2) and the state table."""

import pytest

from app.domain.backoff import retry_delay
from app.domain.digests import canonical_json, payload_digest
from app.domain.errors import ActionError
from app.domain.maker_checker import approver_verdict
from app.domain.preconditions import ReportSnapshot, check_preconditions
from app.domain.states import TRANSITIONS, Move, ProposalState, can, is_terminal


@pytest.mark.parametrize(
    "base, attempt, expected",
    [
        (15, 1, 15),
        (15, 2, 30),
        (15, 4, 120),
        (15, 8, 15 * 128),
        (15, 20, 15 * 128),
        (0.2, 1, 1),
        (400, 8, 21_600),
        (1, 0, 1),
    ],
)
def test_backoff_doubles_per_attempt_and_is_clamped(base, attempt, expected):
    """DLV-6: delay × 2^min(n−1, 7), clamped to 1..21,600 s."""
    assert retry_delay(base, attempt) == expected


SNAPSHOT = ReportSnapshot("decided", "que_1", "dec_2", "remove_content", "post:1")


@pytest.mark.parametrize(
    "key, value",
    [
        ("report_state", "open"),
        ("queue_id", "que_9"),
        ("latest_decision_id", "dec_1"),
        ("decision_code", "no_violation"),
        ("target_reference", "post:2"),
    ],
)
def test_any_named_precondition_that_differs_fails(key, value):
    """PRE-1: every compared field is checked when given."""
    check_preconditions({key: getattr(SNAPSHOT, {"decision_code": "latest_decision_code"}.get(key, key))}, SNAPSHOT)
    with pytest.raises(ActionError) as caught:
        check_preconditions({key: value}, SNAPSHOT)
    assert caught.value.code == "action_precondition_changed"


def test_unnamed_preconditions_are_not_compared():
    """PRE-1: only the preconditions given are compared."""
    check_preconditions({}, SNAPSHOT)
    check_preconditions({"something_else": 1}, SNAPSHOT)


@pytest.mark.parametrize("state", ["appealed", "closed"])
def test_appealed_or_closed_report_accepts_only_corrections(state):
    """PRE-2: an appealed or closed case refuses ordinary actions, not corrections."""
    snapshot = ReportSnapshot(state, None, None, None, None)
    with pytest.raises(ActionError) as caught:
        check_preconditions({}, snapshot)
    assert caught.value.code == "action_case_no_longer_eligible"
    check_preconditions({}, snapshot, is_correction=True)


def test_maker_checker_verdicts():
    """APPR-4: reviewer role required; makers may never approve."""
    assert approver_verdict("op_r", ["reviewer"], ["op_m", None])
    refused_role = approver_verdict("op_x", ["moderator"], ["op_m"])
    assert not refused_role and "reviewers" in refused_role.reason
    refused_maker = approver_verdict("op_m", ["reviewer", "moderator"], ["op_m"])
    assert not refused_maker and "second reviewer" in refused_maker.reason


def test_payload_digest_is_sha256_of_rfc8785_json():
    """ID-2: key order and number spelling do not change the digest."""
    a = {"schema_version": "1", "payload": {"b": 1.0, "a": [1, 2]}, "action_id": "x"}
    b = {"action_id": "x", "payload": {"a": [1, 2], "b": 1}, "schema_version": "1"}
    assert canonical_json(a) == '{"action_id":"x","payload":{"a":[1,2],"b":1},"schema_version":"1"}'
    assert payload_digest(a) == payload_digest(b)
    assert payload_digest(a).startswith("sha256:") and len(payload_digest(a)) == 71
    assert payload_digest(a) != payload_digest({**a, "action_id": "y"})


def test_state_table_covers_the_spec_diagram():
    S = ProposalState
    assert can(Move.APPROVE, S.APPROVAL_REQUIRED) and not can(Move.APPROVE, S.QUEUED)
    assert can(Move.CLAIM, S.APPLYING)  # expired lease (DLV-1)
    assert can(Move.OPERATOR_RETRY, S.FAILED) and not can(Move.OPERATOR_RETRY, S.APPLIED)
    assert not can(Move.WAIT_TIMED_OUT_UNSENT, S.APPLYING)
    assert all(target in S for _, target in TRANSITIONS.values())
    assert is_terminal("failed", True) and not is_terminal("failed", False) and is_terminal("applied", False)
