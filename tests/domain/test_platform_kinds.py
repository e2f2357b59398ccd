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
    ReadBack,
    RestOperation,
    fill_path,
    needs_lookup,
    observed_receipt_fields,
    parse_pds_reference,
    parse_rest_reference,
    pds_error,
    pds_read_back_agrees,
    pds_status_query,
    pds_subject,
    pds_subject_from_status,
    pds_update_body,
    read_back_disagrees,
    rest_body,
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


# --- Exact values: the queries, bodies, receipts and sentences each rule gives -----------

ACCOUNT_REF = "com.atproto.admin.defs#repoRef"
RECORD_REF = "com.atproto.repo.strongRef"


def test_plat2_status_query_names_the_subject_as_one_encoded_parameter():
    """PLAT-2: getSubjectStatus asks by ``uri=`` for a record and ``did=`` for an
    account, each value fully percent-encoded (its '/' and ':' too)."""
    assert pds_status_query({"$type": RECORD_REF, "uri": URI}) == (
        "uri=at%3A%2F%2Fdid%3Aplc%3Aabcdefghijklmnopqrstuvwx%2Fapp.bsky.feed.post%2F3kabc"
    )
    assert pds_status_query({"$type": RECORD_REF, "uri": URI, "cid": CID}).startswith("uri=at%3A%2F%2F")
    assert pds_status_query({"$type": ACCOUNT_REF, "did": DID}) == "did=did%3Aplc%3Aabcdefghijklmnopqrstuvwx"
    assert pds_status_query({"$type": ACCOUNT_REF, "did": "did:web:a&b=c"}) == "did=did%3Aweb%3Aa%26b%3Dc"


def test_plat2_an_observed_outcome_is_recorded_as_an_applied_receipt():
    """PLAT-2: the console's own receipt carries the proposal's identity, ``applied``,
    and the read-back that saw it as ``observed:<what>`` (at most 500 characters)."""
    assert observed_receipt_fields("act_1", "op-1", "sha256:" + "a" * 64, "getSubjectStatus") == {
        "action_id": "act_1",
        "operation_id": "op-1",
        "payload_digest": "sha256:" + "a" * 64,
        "status": "applied",
        "provider_request_id": "observed:getSubjectStatus",
    }
    long = observed_receipt_fields("act_1", "op-1", "d", "x" * 600)["provider_request_id"]
    assert long == "observed:" + "x" * 491 and len(long) == 500


def test_plat2_a_read_back_that_disagrees_is_retried_after_five_seconds():
    """PLAT-2: ``platform_read_back_disagrees`` is retryable, with a 5 s base delay."""
    error = read_back_disagrees()
    assert (error.code, error.retryable, error.delay_seconds) == ("platform_read_back_disagrees", True, 5)


def test_plat1_a_target_that_is_not_an_object_or_a_bad_cid_is_a_subject_error():
    """PLAT-1: a target that is not an object, or a CID of the wrong shape or type, is
    terminal ``platform_subject_invalid``."""
    account, record = PdsOperation(True, "account"), PdsOperation(True, "record")
    for operation, target in (
        (account, DID),
        (account, None),
        (record, {"reference": URI, "cid": "short"}),
        (record, {"reference": URI, "cid": "not a cid!"}),
        (record, {"reference": URI, "cid": 12345678}),
    ):
        with pytest.raises(ActionError) as refused:
            pds_subject(operation, target)
        assert (refused.value.code, refused.value.retryable) == (SUBJECT_INVALID, False), target
    assert pds_subject(record, {"reference": URI, "cid": CID}) == {"$type": RECORD_REF, "uri": URI, "cid": CID}


def test_plat2_a_status_answer_that_is_not_an_object_names_no_subject():
    """PLAT-2: a record's lookup with no usable answer is ``platform_subject_not_found``;
    an account needs no lookup and is kept as it is."""
    record = {"$type": RECORD_REF, "uri": URI}
    for answer in (None, [], "x", {"subject": None}, {"subject": {"uri": URI, "cid": "bad"}}):
        with pytest.raises(ActionError) as refused:
            pds_subject_from_status(record, answer)
        assert (refused.value.code, refused.value.retryable) == (SUBJECT_NOT_FOUND, False), answer
    assert pds_subject_from_status(record, {"subject": {"uri": URI, "cid": CID}}) == {**record, "cid": CID}
    account = {"$type": ACCOUNT_REF, "did": DID}
    assert pds_subject_from_status(account, None) == account


def test_plat2_a_takedown_is_not_confirmed_by_a_status_without_a_takedown():
    """PLAT-2: a status naming the subject but no takedown confirms a reversal only."""
    answer = {"subject": {"uri": URI}}
    assert not pds_read_back_agrees(answer, PdsOperation(True, "record"), "op-1")
    assert pds_read_back_agrees(answer, PdsOperation(False, "record"), "op-1")
    assert not pds_read_back_agrees({"takedown": None}, PdsOperation(False, "record"), "op-1")


def _problems(**changes):
    reference = {key: value for key, value in {**REST, **changes}.items() if value is not None}
    return rest_reference_problems(json.dumps(reference))


def test_plat3_a_reference_that_is_not_an_object_is_one_sentence():
    """PLAT-3: not text, or JSON that is not an object: one problem, said exactly."""
    sentence = ['the reference must be a JSON object with "request" and "outcome"']
    for text in (None, 5, "[]", '"POST /x"', "null"):
        assert rest_reference_problems(text) == sentence, text


def test_plat3_request_problems_are_said_exactly():
    """PLAT-3: the update request is one of POST/PUT/PATCH/DELETE and a path."""
    expected = ["request must be a method (POST, PUT, PATCH, DELETE) and a path, e.g. POST /moderation/removals"]
    for request in (None, 5, "GET /x", "post /x", "POST", "POST x"):
        assert _problems(request=request) == expected, request
    for request in ("DELETE /x", " PUT /x ", "PATCH /posts/{target.reference}/{operation_id}"):
        assert _problems(request=request) == [], request


@pytest.mark.parametrize("path", ["/a//b", "/a/../b", "/a/..", "/a/%2e%2e/b", "/a/%2E./b", "/a?x=1", "/a#top", "/a/b?"])
def test_plat3_paths_stay_under_the_base_url(path):
    """PLAT-3, SEC-5: no '//', '..' segment (plain or encoded), query or fragment."""
    assert _problems(request=f"POST {path}") == [
        "request: the path stays under the connection's base URL (no '//', '..', query or fragment)"
    ]


def test_plat3_dots_inside_a_segment_are_not_a_parent():
    """PLAT-3: only a whole '..' segment leaves the base URL."""
    assert _problems(request="POST /v1.2/a..b/..c") == []


def test_plat3_unknown_placeholders_are_listed_sorted():
    """PLAT-3: each unknown placeholder named, sorted, with the ones allowed."""
    assert _problems(request="POST /{zeta}/{alpha}/{operation_id}") == [
        "request: unknown placeholder(s) alpha, zeta (use operation_id, action_id, target.reference, target.kind)"
    ]


def test_plat3_unknown_keys_are_listed_sorted():
    """PLAT-3: each unknown key named, sorted, with the keys allowed."""
    assert _problems(zeta=1, alpha=2) == ["unknown key(s) alpha, zeta (use body, outcome, read_back, request)"]


def test_plat3_outcome_problems_are_said_exactly():
    """PLAT-3: outcome is a non-empty object; its keys are status classes or codes,
    at least one of them 2xx; its values JMESPath."""
    mapping = ['outcome must map status classes ("2xx") or codes ("409") to JMESPath expressions']
    for outcome in (None, {}, [], "2xx", ["2xx"]):
        assert _problems(outcome=outcome) == mapping, outcome
    assert _problems(outcome={"404": "'failed'"}) == ["outcome needs a 2xx key (or a 2xx code): how a success is read"]
    assert _problems(outcome={"201": "'applied'"}) == []
    assert _problems(outcome={"2xx": "'applied'", "6xx": "'failed'"}) == [
        "outcome key '6xx' is not a status class like 2xx or a code like 409"
    ]
    assert _problems(outcome={"2xx": 5}) == ["outcome 2xx must be a JMESPath expression string"]
    assert _problems(body=5) == ["body must be a JMESPath expression string"]


def test_plat3_read_back_problems_are_said_exactly():
    """PLAT-3: read_back is an object with exactly request (GET or POST and a path),
    value (JMESPath) and expected."""
    read_back = REST["read_back"]
    assert _problems(read_back="GET /x") == ['read_back must be an object with "request", "value" and "expected"']
    assert _problems(read_back=[]) == ['read_back must be an object with "request", "value" and "expected"']
    exactly = 'read_back needs exactly "request", "value" and "expected"'
    assert _problems(read_back={**read_back, "extra": 1}) == [exactly]
    assert _problems(read_back={"request": read_back["request"], "value": "v"}) == [exactly]
    assert _problems(read_back={**read_back, "request": "PUT /x"}) == [
        "read_back.request must be a method (GET, POST) and a path, e.g. GET /moderation/removals"
    ]
    assert _problems(read_back={**read_back, "request": "POST /search"}) == []
    assert _problems(read_back={**read_back, "value": None}) == ["read_back.value must be a JMESPath expression string"]
    assert _problems(read_back={**read_back, "expected": None}) == []  # null is a value to expect


def test_plat3_a_reference_is_parsed_into_exactly_what_it_declares():
    """PLAT-3: method, path, body mapping, outcome keys and read-back as declared; a bad
    reference is ``action_component_operation_invalid``."""
    assert parse_rest_reference(json.dumps(REST)) == RestOperation(
        "POST",
        "/v2/moderation/requests",
        "{post: target.reference, action: 'remove'}",
        {"2xx": "request.state == 'done' && 'applied' || 'accepted'", "404": "'failed'"},
        ReadBack("GET", "/v2/posts/{target.reference}/moderation", "visibility", "removed"),
    )
    bare = {"request": "DELETE /posts/{target.reference}", "outcome": {"2xx": "'applied'"}}
    assert parse_rest_reference(json.dumps(bare)) == RestOperation(
        "DELETE", "/posts/{target.reference}", None, {"2xx": "'applied'"}, None
    )
    for bad in (None, "{", json.dumps({**REST, "request": "GET /x"})):
        with pytest.raises(ActionError) as refused:
            parse_rest_reference(bad)
        assert (refused.value.code, refused.value.retryable) == ("action_component_operation_invalid", False)


def test_plat3_the_body_mapping_or_the_standard_body():
    """PLAT-3: without a mapping the standard body is sent as it is; a mapping is
    JMESPath over the action's fields; one that does not evaluate is
    ``action_configuration_invalid``."""
    fields = {"target": {"reference": "post:1"}, "payload": {"reason_code": "spam"}}
    standard = {"action_id": "act_1"}
    plain = RestOperation("POST", "/x", None, {"2xx": "'applied'"}, None)
    assert rest_body(plain, fields, standard) is standard
    mapped = RestOperation("POST", "/x", "{post: target.reference, why: payload.reason_code}", {}, None)
    assert rest_body(mapped, fields, standard) == {"post": "post:1", "why": "spam"}
    for body in ("abs(target.reference)", "[" * 40 + "]" * 40, "a[?"):
        with pytest.raises(ActionError) as refused:
            rest_body(RestOperation("POST", "/x", body, {}, None), fields, standard)
        assert (refused.value.code, refused.value.retryable) == ("action_configuration_invalid", False), body


def test_plat3_a_body_that_is_not_json_is_a_retryable_unreadable_outcome():
    """PLAT-3: ``platform_outcome_unreadable``, retryable."""
    operation = parse_rest_reference(json.dumps(REST))
    with pytest.raises(ActionError) as unreadable:
        rest_outcome(operation, 200, b"<html>")
    assert (unreadable.value.code, unreadable.value.retryable) == ("platform_outcome_unreadable", True)
    assert rest_outcome(operation, 404, b"") == "failed"  # an empty body is null, not an error


def test_plat3_path_placeholders_need_a_text_value():
    """PLAT-3: a placeholder whose value is missing, empty, not text, or under a field
    that is not an object is ``platform_subject_invalid``; others are filled encoded."""
    for fields in ({"target": "post:1"}, {"target": {"reference": ""}}, {"target": {"reference": 5}}, {}):
        with pytest.raises(ActionError) as missing:
            fill_path("/x/{target.reference}", fields)
        assert (missing.value.code, missing.value.retryable) == (SUBJECT_INVALID, False), fields
    fields = {"operation_id": "op 1", "action_id": "act_1", "target": {"reference": "p", "kind": "post"}}
    assert fill_path("/{target.kind}/{action_id}/{operation_id}", fields) == "/post/act_1/op%201"


def test_plat3_an_outcome_expression_that_fails_on_the_body_is_retryable_like_any_unreadable_outcome():
    """PLAT-3: an outcome expression that cannot be evaluated on this answer (a type
    error: the platform answered an unexpected shape) gives no outcome, as one giving
    "done" does: ``platform_outcome_unreadable``, retryable, the same code and meaning."""
    reference = {**REST, "outcome": {"2xx": "abs(state) > `0` && 'applied' || 'failed'"}}
    operation = parse_rest_reference(json.dumps(reference))
    assert rest_outcome(operation, 200, b'{"state": 1}') == "applied"
    with pytest.raises(ActionError) as unreadable:
        rest_outcome(operation, 200, b'{"state": "done"}')
    assert (unreadable.value.code, unreadable.value.retryable) == ("platform_outcome_unreadable", True)


def test_plat3_an_outcome_expression_past_the_limits_is_not_run_and_is_unreadable():
    """PLAT-3, SEC-5: an outcome expression stored before the limits held is not run:
    ``platform_outcome_unreadable``, retryable like every unreadable outcome."""
    operation = RestOperation("POST", "/x", None, {"2xx": "[" * 40 + "'applied'" + "]" * 40}, None)
    with pytest.raises(ActionError) as unreadable:
        rest_outcome(operation, 200, b"{}")
    assert (unreadable.value.code, unreadable.value.retryable) == ("platform_outcome_unreadable", True)


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


@pytest.mark.parametrize(("value", "segment"), [(".", "%2E"), ("..", "%2E%2E"), ("...", "%2E%2E%2E")])
def test_four10_a_dot_segment_value_is_encoded_and_cannot_walk_the_path(value, segment):
    """FOUR-10 (issue 22): a value that is a whole dot segment (a target kind or reference
    of ``..``) is percent-encoded; left as it was, the HTTP client resolves
    ``/v2/posts/../moderation`` to ``/v2/moderation`` and the action reaches another path."""
    fields = {"target": {"reference": value, "kind": value}}
    assert fill_path("/v2/posts/{target.reference}/moderation", fields) == f"/v2/posts/{segment}/moderation"
    assert fill_path("/{target.kind}/{target.reference}", fields) == f"/{segment}/{segment}"
    # dots inside a value stay as they are: they walk nowhere
    assert fill_path("/p/{target.reference}", {"target": {"reference": "post:1.2"}}) == "/p/post%3A1.2"
