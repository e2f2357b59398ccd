"""Where an approved action goes and how its answer is read (SPEC FOUR-5, ID-2)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from app.domain.digests import payload_digest
from app.domain.proposal import destination as D
from app.domain.proposal import identity as I

from .test_proposal_identity import T0, workflow

TAKEDOWN = {"request": "POST /v1/takedowns/{target.reference}", "outcome": {"2xx": "'applied'"}}
READS_404_AS_APPLIED = {
    "request": "POST /v1/nowhere/{target.reference}",
    "outcome": {"2xx": "'applied'", "4xx": "'applied'"},
}
FIELDS = D.delivery_fields("p_1", "op_1", {"reference": "post:1001"})


def rest(reference: dict, base: str = "https://platform.example/") -> D.Destination:
    return D.Destination("rest", json.dumps(reference), base)


def test_four_5_rest_description_names_origin_resolved_path_and_outcome_map():
    """FOUR-5: a REST delivery is its method, origin (port written), the path as sent
    (placeholders filled and percent-encoded) and the status -> outcome map."""
    described = D.describe(rest(TAKEDOWN), FIELDS)

    assert described == {
        "kind": "rest",
        "origin": "https://platform.example:443",
        "method": "POST",
        "path": "/v1/takedowns/post%3A1001",
        "answer": "outcome",
        "outcome": {"2xx": "'applied'"},
        "read_back": None,
    }


def test_four_5_in_words_says_where_and_how_it_is_read():
    """FOUR-5: the approval panel's sentence, host apart so it can be shown prominently."""
    words = D.in_words(D.describe(rest(TAKEDOWN), FIELDS))

    assert words.text == (
        "Sends POST https://platform.example:443/v1/takedowns/post%3A1001 · REST · "
        "a 2xx answer means applied, 4xx failed, 5xx retried"
    )
    assert (words.host, words.port, words.warnings) == ("platform.example", "443", ())


def test_four_5_a_mapping_that_reads_4xx_as_applied_is_said_and_warned():
    """FOUR-5 (issue 22): a 4xx read as applied is in the words and flagged."""
    words = D.in_words(D.describe(rest(READS_404_AS_APPLIED), FIELDS))

    assert "a 2xx answer means applied, 4xx applied, 5xx retried" in words.text
    assert words.warnings == ("a 4xx answer (an error) is read as applied",)


def test_four_5_webhook_and_pds_descriptions():
    """FOUR-5: the receipt contract's delivery; the PDS update with what is read back."""
    hook = D.describe(D.Destination("webhook", "PUT /actions/takedown", "http://127.0.0.1:8123/api/"), FIELDS)
    assert hook == {
        "kind": "webhook",
        "origin": "http://127.0.0.1:8123",
        "method": "PUT",
        "path": "/api/actions/takedown",
        "answer": "receipt",
    }
    assert D.in_words(hook).text.startswith("Sends PUT http://127.0.0.1:8123/api/actions/takedown · webhook · ")
    pds = D.describe(D.Destination("atproto_pds", "takedown record", "https://pds.example"), FIELDS)
    assert pds["path"] == "/xrpc/com.atproto.admin.updateSubjectStatus"
    assert pds["operation"] == "takedown record"
    assert pds["read_back"] == {"method": "GET", "path": "/xrpc/com.atproto.admin.getSubjectStatus"}
    words = D.in_words(pds).text
    assert words.startswith(
        "Sends POST https://pds.example:443/xrpc/com.atproto.admin.updateSubjectStatus · AT Protocol PDS"
    )
    assert "GET /xrpc/com.atproto.admin.getSubjectStatus reads back the takedown state" in words


def test_four_5_an_unparseable_reference_is_described_not_raised():
    """FOUR-5: describing never fails; delivery refuses such a component before sending."""
    described = D.describe(D.Destination("rest", "{not json", "https://platform.example"), FIELDS)
    assert described == {
        "kind": "rest",
        "origin": "https://platform.example:443",
        "invalid": "action_component_operation_invalid",
    }


def test_four_5_digest_material_covers_the_delivery_and_the_digest_changes_with_it():
    """FOUR-5, ID-2: a proposal prepared with a destination stores its description and
    its digest covers it; another host or another outcome map is another digest."""
    good = workflow(destination=rest(TAKEDOWN))
    other_host = workflow(destination=rest(TAKEDOWN, "https://admin.example/"))
    lenient = workflow(destination=rest({**TAKEDOWN, "outcome": {"2xx": "'applied'", "4xx": "'applied'"}}))

    assert good.delivery["origin"] == "https://platform.example:443"
    assert good.delivery["path"].endswith("/v1/takedowns/" + "post%3A1")  # the mapped target's reference
    material = I.digest_material(
        action_id=good.id,
        action_code=good.action_code,
        target=good.target,
        payload=good.payload,
        preconditions=good.preconditions,
        component_version_id=good.component_version_id,
        expires_at=good.expires_at,
        installation_id=good.installation_id,
        workflow_version_id=good.workflow_version_id,
        policy_version_id=good.policy_version_id,
        delivery=good.delivery,
    )
    assert material["delivery"] == good.delivery
    assert payload_digest(material) == good.payload_digest
    assert len({good.payload_digest, other_host.payload_digest, lenient.payload_digest}) == 3


def test_four_5_material_of_a_proposal_prepared_before_is_unchanged():
    """ID-2: without a description the material has no ``delivery`` key, so the digests
    of proposals stored before FOUR-5 still verify."""
    old = workflow()
    assert old.delivery is None
    material = I.digest_material(
        action_id=old.id,
        action_code=old.action_code,
        target=old.target,
        payload=old.payload,
        preconditions=old.preconditions,
        component_version_id=old.component_version_id,
        expires_at=old.expires_at,
        installation_id=old.installation_id,
        workflow_version_id=old.workflow_version_id,
        policy_version_id=old.policy_version_id,
    )
    assert "delivery" not in material and payload_digest(material) == old.payload_digest


def test_four_5_check_unchanged_refuses_another_destination():
    """FOUR-5: the delivery in force must be the one approved; both are named."""
    approved = D.describe(rest(TAKEDOWN), FIELDS)
    D.check_unchanged(approved, D.describe(rest(TAKEDOWN), FIELDS))
    D.check_unchanged(None, approved)  # prepared before FOUR-5: not compared
    moved = D.describe(rest(TAKEDOWN, "https://admin.example/"), FIELDS)
    with pytest.raises(D.DeliveryChanged) as raised:
        D.check_unchanged(approved, moved)
    assert raised.value.code == "action_delivery_changed" and not raised.value.retryable
    assert (raised.value.before["origin"], raised.value.after["origin"]) == (
        "https://platform.example:443",
        "https://admin.example:443",
    )


def test_four_5_compensation_and_correction_carry_their_delivery():
    """FOUR-5: proposals with their own approval (compensation, correction) describe theirs."""
    from .test_proposal_identity import ORIGINAL, compensation_of, correction_of

    hook = D.Destination("webhook", "POST /actions/restore", "https://platform.example")
    version = {"component_version_id": "cv_2", "destination": hook}
    compensation = compensation_of(ORIGINAL, target={"reference": "post:1"}, **version)
    correction = correction_of(ORIGINAL, appeal_decision_id="ad_1", now=T0 + timedelta(seconds=1), **version)
    assert compensation.delivery["path"] == correction.delivery["path"] == "/actions/restore"


def test_four_5_a_code_key_is_said_before_its_class_left_to_its_http_meaning():
    """FOUR-5, PLAT-3: a code key wins over its class; the class still reads as HTTP says."""
    reference = {**TAKEDOWN, "outcome": {"2xx": "'applied'", "404": "'applied'", "409": "'failed'"}}
    words = D.in_words(D.describe(rest(reference), FIELDS))

    assert words.text.endswith("a 2xx answer means applied, 404 applied, 409 failed, 4xx failed, 5xx retried")
    assert words.warnings == ("a 404 answer (an error) is read as applied",)


def test_four_5_an_error_status_read_by_an_expression_is_flagged_a_success_one_is_not():
    """FOUR-5: only error statuses draw a warning; an expression there may give applied."""
    reference = {**TAKEDOWN, "outcome": {"2xx": "state == 'done' && 'applied' || 'accepted'", "4xx": "state"}}
    words = D.in_words(D.describe(rest(reference), FIELDS))

    assert words.warnings == ("a 4xx answer (an error) is read by an expression that may give applied",)
    assert "a 2xx answer means what state == 'done' && 'applied' || 'accepted' gives" in words.text


def test_four_5_in_words_says_what_a_rest_read_back_confirms():
    """FOUR-5: a REST mapping with a read back says which request is read back and the
    value that counts as applied, as the reviewer approves it."""
    reference = {
        **TAKEDOWN,
        "read_back": {"request": "GET /v1/posts/{target.reference}", "value": "state", "expected": "removed"},
    }
    words = D.in_words(D.describe(rest(reference), FIELDS))

    assert words.reading == (
        "a 2xx answer means applied, 4xx failed, 5xx retried; then reads back GET /v1/posts/post%3A1001"
        ' and counts it applied only when state is "removed"'
    )
    assert (words.method, words.scheme, words.path, words.kind) == ("POST", "https", "/v1/takedowns/post%3A1001", "REST")


def test_four_5_in_words_of_a_component_that_cannot_be_sent_says_so_and_warns():
    """FOUR-5: an unparseable reference has no method or path; the words say where it
    would go and why it cannot be sent, and the warning repeats it."""
    words = D.in_words(D.describe(D.Destination("rest", "{bad", "https://platform.example:8443/base/"), FIELDS))

    assert words.text == (
        "Sends https://platform.example:8443 · REST · cannot be sent as configured (action_component_operation_invalid)"
    )
    assert (words.method, words.path, words.host, words.port) == ("", "", "platform.example", "8443")
    assert words.warnings == ("the component cannot be sent as configured (action_component_operation_invalid)",)


def test_four_5_in_words_of_the_receipt_contract_and_of_a_pds_reversal():
    """FOUR-5: a webhook or external API is read by its signed receipt; a PDS reversal by
    the state it reads back."""
    hook = D.in_words(D.describe(D.Destination("external_api", "/actions/x", "http://10.0.0.5:8080"), FIELDS))
    assert hook.text == (
        "Sends POST http://10.0.0.5:8080/actions/x · external API · "
        "the platform's signed receipt says applied, accepted or failed; 4xx failed, 5xx retried"
    )
    pds = D.in_words(D.describe(D.Destination("atproto_pds", "reversal account", "https://pds.example"), FIELDS))
    assert pds.reading == (
        "reversal account; applied only when GET /xrpc/com.atproto.admin.getSubjectStatus"
        " reads back the takedown state with this action's reference"
    )
    assert pds.warnings == ()


def test_four_5_a_proposal_prepared_before_four_5_has_no_words_and_no_host():
    """FOUR-5: no stored description, nothing to say; the task list shows the host alone."""
    assert D.in_words(None) is None and D.in_words({}) is None
    assert D.host_of(None) is None and D.host_of({}) is None
    assert D.host_of({"kind": "webhook"}) is None
    assert D.host_of(D.describe(rest(TAKEDOWN, "https://Platform.Example:8443/x"), FIELDS)) == "platform.example"


def test_four_5_every_path_is_described_under_the_connections_base_path():
    """FOUR-5, PLAT-3: the request and read back paths are the ones egress sends, under
    the base URL's path, with the action's placeholders filled."""
    reference = {
        "request": "PUT /v1/{action_id}/{operation_id}/{target.reference}",
        "outcome": {"2xx": "'applied'"},
        "read_back": {"request": "GET /v1/posts/{target.reference}", "value": "state", "expected": "removed"},
    }
    described = D.describe(rest(reference, "https://platform.example/BOX/"), FIELDS)
    assert described["path"] == "/BOX/v1/p_1/op_1/post%3A1001"
    assert described["read_back"]["path"] == "/BOX/v1/posts/post%3A1001"
    pds = D.describe(D.Destination("atproto_pds", "takedown account", "https://pds.example/pds/"), FIELDS)
    assert pds == {
        "kind": "atproto_pds",
        "origin": "https://pds.example:443",
        "method": "POST",
        "path": "/pds/xrpc/com.atproto.admin.updateSubjectStatus",
        "answer": "read_back",
        "operation": "takedown account",
        "read_back": {"method": "GET", "path": "/pds/xrpc/com.atproto.admin.getSubjectStatus"},
    }


def test_four_5_an_ipv6_origin_keeps_its_brackets():
    """FOUR-5: ``https://[::1]:443``, so the port cannot be read as part of the address."""
    assert D.origin_of("https://[::1]/api") == "https://[::1]:443"
    assert D.origin_of("http://10.0.0.5/") == "http://10.0.0.5:80"


@pytest.mark.parametrize("reference", ["GET /actions", "POST actions", "POST /a//b", "", None])
def test_dlv2_an_operation_that_is_not_a_method_and_a_plain_path_is_refused(reference):
    """DLV-2, SEC-3: refused with action_component_operation_invalid."""
    from app.domain.errors import ActionError

    with pytest.raises(ActionError) as caught:
        D.parse_operation(reference)
    assert caught.value.code == "action_component_operation_invalid"


def test_four_5_an_error_status_read_as_accepted_is_warned_and_a_quoted_literal_is_read():
    """FOUR-5, PLAT-3: a 4xx read as accepted keeps the proposal waiting on an error: warned.
    A JMESPath raw string literal (backquoted JSON) reads as its value."""
    reference = {**TAKEDOWN, "outcome": {"2xx": '`"applied"`', "409": '`"accepted"`'}}
    words = D.in_words(D.describe(rest(reference), FIELDS))

    assert words.reading == "a 2xx answer means applied, 409 accepted, 4xx failed, 5xx retried"
    assert words.warnings == ("a 409 answer (an error) is read as accepted",)


def test_four_5_a_description_missing_parts_shows_them_empty_and_an_unknown_kind_by_its_name():
    """FOUR-5: the words never invent a kind, host or port the description does not hold."""
    words = D.in_words({"origin": "https://platform.example", "method": "POST", "path": "/a"})
    assert (words.kind, words.host, words.port) == ("", "platform.example", "")
    assert D.in_words({"kind": "custom", "origin": "https://platform.example:443"}).kind == "custom"


def test_four_5_in_words_writes_an_ipv6_host_as_a_url_does():
    """FOUR-5: the approver reads the URL the request goes to; an IPv6 host keeps its
    brackets (``https://::1:8443/a`` would be another address and port)."""
    words = D.in_words(D.describe(rest(TAKEDOWN, "https://[::1]:8443/"), FIELDS))

    assert words.url == "https://[::1]:8443/v1/takedowns/post%3A1001"
    assert (words.host, words.written_host) == ("::1", "[::1]")  # the page shows the host apart
    assert words.text.startswith("Sends POST https://[::1]:8443/v1/")


def test_four_5_an_origin_with_an_unreadable_port_is_said_without_one():
    """FOUR-5: a base URL whose port cannot be read describes an origin without a port
    (never ``:None``), and the panel's sentence still renders."""
    assert D.origin_of("https://h.example:99999/") == "https://h.example"
    words = D.in_words(D.describe(rest(TAKEDOWN, "https://h.example:99999/"), FIELDS))

    assert words.url == "https://h.example/v1/takedowns/post%3A1001"
