"""The outcome-reading rules of the platform kinds, as pure functions (SPEC PLAT-1..3)."""

from __future__ import annotations

import json

import pytest

from app.domain.errors import ActionError
from app.domain.platform_kinds import (
    AUTH_FAILED,
    SUBJECT_INVALID,
    SUBJECT_NOT_FOUND,
    PdsOperation,
    fill_path,
    needs_lookup,
    parse_pds_reference,
    parse_rest_reference,
    pds_error,
    pds_read_back_agrees,
    pds_subject,
    pds_subject_from_status,
    pds_update_body,
    rest_outcome,
    rest_read_back_agrees,
    rest_reference_problems,
)

DID = "did:plc:abcdefghijklmnopqrstuvwx"
URI = f"at://{DID}/app.bsky.feed.post/3kabc"
CID = "bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
REST = {
    "request": "POST /v2/moderation/requests",
    "body": "{post: target.reference, action: 'remove'}",
    "outcome": {"2xx": "request.state == 'done' && 'applied' || 'accepted'", "404": "'failed'"},
    "read_back": {
        "request": "GET /v2/posts/{target.reference}/moderation",
        "value": "visibility",
        "expected": "removed",
    },
}


def test_plat1_references_name_the_operation_and_the_subject_kind():
    """PLAT-1: a PDS component takes down or reverses an account or a record."""
    assert parse_pds_reference("takedown record") == PdsOperation(True, "record")
    assert parse_pds_reference(" reversal account ") == PdsOperation(False, "account")
    for bad in ("takedown", "delete record", "takedown post", None, "takedown  record x"):
        with pytest.raises(ActionError) as refused:
            parse_pds_reference(bad)
        assert refused.value.code == "action_component_operation_invalid"


def test_plat1_subjects_from_targets():
    """PLAT-1: an account is its DID (or the repository of a reported post); a record is
    its at-uri, with the CID the mapping gave or to be looked up on the PDS first."""
    account, record = PdsOperation(True, "account"), PdsOperation(True, "record")
    assert pds_subject(account, {"reference": DID}) == {"$type": "com.atproto.admin.defs#repoRef", "did": DID}
    assert pds_subject(account, {"reference": URI})["did"] == DID
    subject = pds_subject(record, {"reference": URI})
    assert subject == {"$type": "com.atproto.repo.strongRef", "uri": URI} and needs_lookup(subject)
    with_cid = pds_subject(record, {"reference": URI, "cid": CID})
    assert with_cid["cid"] == CID and not needs_lookup(with_cid)
    for operation, target in ((record, {"reference": DID}), (account, {"reference": "post:1"}), (record, {})):
        with pytest.raises(ActionError) as refused:
            pds_subject(operation, target)
        assert (refused.value.code, refused.value.retryable) == (SUBJECT_INVALID, False)


def test_plat1_update_body_carries_the_operation_id_as_takedown_reference():
    """PLAT-1: updateSubjectStatus sets a state (not a toggle) with our reference, so
    sending it again is idempotent by reference."""
    subject = {"$type": "com.atproto.admin.defs#repoRef", "did": DID}
    assert pds_update_body(subject, PdsOperation(True, "account"), "op-1") == {
        "subject": subject,
        "takedown": {"applied": True, "ref": "op-1"},
    }
    assert pds_update_body(subject, PdsOperation(False, "account"), "op-2")["takedown"] == {
        "applied": False,
        "ref": "op-2",
    }


def test_plat2_read_back_must_show_the_intended_state_with_our_reference():
    """PLAT-2: a takedown agrees only when applied with our reference; a reversal when
    nothing is applied."""
    takedown, reversal = PdsOperation(True, "record"), PdsOperation(False, "record")
    ours = {"subject": {"uri": URI}, "takedown": {"applied": True, "ref": "op-1"}}
    assert pds_read_back_agrees(ours, takedown, "op-1")
    assert not pds_read_back_agrees(ours, takedown, "op-other")  # someone else's takedown
    assert not pds_read_back_agrees({"subject": {}, "takedown": {"applied": False}}, takedown, "op-1")
    assert not pds_read_back_agrees(ours, reversal, "op-1")
    assert pds_read_back_agrees({"subject": {"uri": URI}, "takedown": {"applied": False}}, reversal, "op-2")
    assert pds_read_back_agrees({"subject": {"uri": URI}}, reversal, "op-2")
    assert not pds_read_back_agrees(None, takedown, "op-1")


def test_plat2_unknown_subject_and_wrong_password_are_terminal():
    """PLAT-2: 400 NotFound (and its cousins) is platform_subject_not_found, 401 is
    platform_auth_failed, both terminal; other answers keep their HTTP class."""
    for error in ("NotFound", "RecordNotFound", "RepoNotFound"):
        found = pds_error(400, {"error": error, "message": "no"})
        assert (found.code, found.retryable) == (SUBJECT_NOT_FOUND, False)
    assert (pds_error(401, {"error": "AuthenticationRequired"}).code, pds_error(401, None).retryable) == (
        AUTH_FAILED,
        False,
    )
    assert pds_error(400, {"error": "InvalidRequest"}) is None
    assert pds_error(503, None) is None


def test_plat2_lookup_completes_a_record_subject_with_its_cid():
    """PLAT-2: the status read first gives the record's CID; an answer about another
    subject is not found."""
    subject = {"$type": "com.atproto.repo.strongRef", "uri": URI}
    answer = {"subject": {"$type": "com.atproto.repo.strongRef", "uri": URI, "cid": CID}, "takedown": {}}
    assert pds_subject_from_status(subject, answer)["cid"] == CID
    with pytest.raises(ActionError) as refused:
        pds_subject_from_status(subject, {"subject": {"uri": URI + "x", "cid": CID}})
    assert refused.value.code == SUBJECT_NOT_FOUND


def test_plat3_rest_reference_problems_are_listed_at_save():
    """PLAT-3: a REST reference is checked at save, every problem in a sentence."""
    assert rest_reference_problems(json.dumps(REST)) == []
    assert rest_reference_problems("{") and "not JSON" in rest_reference_problems("{")[0]
    bad = {
        "request": "GET /x",
        "outcome": {"4xx": "'failed'", "abc": "x", "500": "a[?"},
        "read_back": {"request": "GET /a/{secret}", "value": "v"},
        "extra": 1,
    }
    problems = " | ".join(rest_reference_problems(json.dumps(bad)))
    for phrase in (
        "unknown key(s) extra",
        "request must be a method",
        "'abc'",
        "outcome 500 is not a JMESPath",
        "needs a 2xx key",
        'exactly "request", "value" and "expected"',
        "unknown placeholder(s) secret",
    ):
        assert phrase in problems, phrase
    deep = {**REST, "body": "[" * 40 + "]" * 40}
    assert any("nested too deeply" in p for p in rest_reference_problems(json.dumps(deep)))
    with pytest.raises(ActionError):
        parse_rest_reference(json.dumps(bad))


def test_plat3_outcome_from_status_class_and_jmespath():
    """PLAT-3: the code's key wins over its class's; the expression must give applied,
    accepted or failed; an undeclared status keeps its HTTP meaning (None)."""
    operation = parse_rest_reference(json.dumps(REST))
    assert rest_outcome(operation, 201, b'{"request": {"state": "done"}}') == "applied"
    assert rest_outcome(operation, 200, b'{"request": {"state": "queued"}}') == "accepted"
    assert rest_outcome(operation, 404, b'{"problem": "no_such_post"}') == "failed"
    assert rest_outcome(operation, 503, b"") is None
    odd = parse_rest_reference(json.dumps({**REST, "outcome": {"2xx": "request.state"}}))
    with pytest.raises(ActionError) as unreadable:
        rest_outcome(odd, 200, b'{"request": {"state": "done"}}')
    assert (unreadable.value.code, unreadable.value.retryable) == ("platform_outcome_unreadable", True)
    with pytest.raises(ActionError):
        rest_outcome(operation, 200, b"<html>")


def test_plat3_read_back_agreement_and_path_templates():
    """PLAT-3: the read-back agrees when its JMESPath value equals the expected one;
    path placeholders are filled as single percent-encoded segments."""
    operation = parse_rest_reference(json.dumps(REST))
    assert rest_read_back_agrees(operation.read_back, b'{"visibility": "removed"}')
    assert not rest_read_back_agrees(operation.read_back, b'{"visibility": "visible"}')
    assert not rest_read_back_agrees(operation.read_back, b"not json")
    fields = {"target": {"reference": "post:1/../admin"}, "operation_id": "op-1"}
    assert fill_path(operation.read_back.path, fields) == "/v2/posts/post%3A1%2F..%2Fadmin/moderation"
    with pytest.raises(ActionError) as missing:
        fill_path("/x/{target.reference}", {"target": {}})
    assert missing.value.code == SUBJECT_INVALID


def test_plat3_json_nested_too_deep_is_an_unreadable_outcome_not_a_crash():
    """PLAT-3: an answer nested too deep to decode (RecursionError, not ValueError) is
    ``platform_outcome_unreadable`` like any body that is not JSON; a read-back of it disagrees."""
    operation = parse_rest_reference(json.dumps(REST))
    with pytest.raises(ActionError) as unreadable:
        rest_outcome(operation, 200, b"[" * 200_000)
    assert (unreadable.value.code, unreadable.value.retryable) == ("platform_outcome_unreadable", True)


def test_plat2_a_reversal_does_not_agree_with_a_takedown_that_is_not_plainly_off():
    """PLAT-2: a read-back must show the intended state. ``applied`` given as ``"true"``
    or ``1`` is no boolean false: the PDS may still hold the takedown, so a reversal's
    read-back disagrees (retryable) instead of recording an observed ``applied``."""
    reversal = PdsOperation(False, "account")
    for odd in ("true", 1, "yes", [True]):
        assert not pds_read_back_agrees({"subject": {}, "takedown": {"applied": odd, "ref": "x"}}, reversal, "op-2")
    assert pds_read_back_agrees({"subject": {}, "takedown": {"applied": False}}, reversal, "op-2")
    assert pds_read_back_agrees({"subject": {}, "takedown": {}}, reversal, "op-2")
