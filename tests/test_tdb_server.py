"""The loopback Transparency Database (tests/tdb_server.py) against the documented
examples of its API, and the console's own rules against it (SPEC DSA-2, DSA-3)."""

from __future__ import annotations

import pytest
import requests

from app.domain.dsa import build_statement, statement_problems
from tests.dsa_examples import documented_example, facts

AUTH = {"Authorization": "Bearer tdb-token", "Accept": "application/json"}


def post(tdb, path: str, body, headers=AUTH) -> requests.Response:
    return requests.post(tdb.base_url + path, json=body, headers=headers, timeout=10)


def statement(n: int, **changes) -> dict:
    return documented_example(puid=f"puid-{n}", **changes)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "tdb-token"}])
def test_a_missing_or_wrong_token_is_401(tdb, headers):
    """Token Error: 401 Unauthorized, nothing created."""
    answer = post(tdb, "/statement", documented_example(), headers={"Accept": "application/json", **headers})
    assert answer.status_code == 401
    assert answer.json() == {"message": "Unauthenticated."}
    assert tdb.statements == {}


def test_the_documented_example_is_created(tdb):
    """Creating a Statement: 201 with the statement as created, its uuid, id,
    created_at, platform_name, permalink, self and puid."""
    answer = post(tdb, "/statement", documented_example())
    assert answer.status_code == 201
    body = answer.json()
    assert body["puid"] == "TK421"
    assert body["decision_ground"] == "DECISION_GROUND_INCOMPATIBLE_CONTENT"
    assert {"uuid", "id", "created_at", "platform_name", "permalink", "self"} <= set(body)
    assert body["self"].endswith("/api/v1/statement/" + body["uuid"])


def test_a_used_puid_is_refused_with_the_existing_statement(tdb):
    """PUID Error: 422 "The identifier given is not unique within this platform."
    with the existing puid; nothing new created."""
    assert post(tdb, "/statement", documented_example()).status_code == 201
    answer = post(tdb, "/statement", documented_example())
    assert answer.status_code == 422
    assert answer.json()["errors"] == {"puid": ["The identifier given is not unique within this platform."]}
    assert answer.json()["existing"]["puid"] == "TK421"
    assert len(tdb.statements) == 1


def test_a_blank_payload_names_every_required_field(tdb):
    """Errors: a blank payload is 422 with the documented required-field errors."""
    answer = post(tdb, "/statement", {})
    assert answer.status_code == 422
    errors = answer.json()["errors"]
    documented = {
        "decision_visibility", "decision_monetary", "decision_provision", "decision_account", "decision_ground",
        "content_type", "category", "application_date", "decision_facts", "source_type", "automated_detection",
        "automated_decision", "puid",
    }  # fmt: skip
    assert documented <= set(errors)
    assert errors["decision_ground"] == ["The decision ground field is required."]
    assert answer.json()["message"].startswith(
        "The decision visibility field is required when none of decision monetary / decision provision / "
        "decision account are present. (and "
    )


def test_an_invalid_value_is_named(tdb):
    """Errors: "maybe" for automated_decision is "The selected automated decision is invalid."."""
    answer = post(tdb, "/statement", documented_example(automated_decision="maybe"))
    assert answer.status_code == 422
    assert answer.json() == {
        "message": "The selected automated decision is invalid.",
        "errors": {"automated_decision": ["The selected automated decision is invalid."]},
    }


def test_a_batch_is_created_whole(tdb):
    """Creating Multiple Statements: 201 with every statement, each with its uuid."""
    answer = post(tdb, "/statements", {"statements": [statement(n) for n in range(3)]})
    assert answer.status_code == 201
    created = answer.json()["statements"]
    assert [s["puid"] for s in created] == ["puid-0", "puid-1", "puid-2"]
    assert all(s["uuid"] for s in created)
    assert set(tdb.statements) == {"puid-0", "puid-1", "puid-2"}


def test_one_invalid_statement_creates_none_and_errors_are_keyed_by_position(tdb):
    """DSA-3 (documented): errors indexed statement_N; NONE of the statements created."""
    batch = [
        statement(0, decision_monetary="X", automated_detection=None),
        statement(1),
        statement(2, decision_provision="Y"),
    ]
    answer = post(tdb, "/statements", {"statements": batch})
    assert answer.status_code == 422
    errors = answer.json()["errors"]
    assert set(errors) == {"statement_0", "statement_2"}
    assert errors["statement_0"]["decision_monetary"] == ["The selected decision monetary is invalid."]
    assert errors["statement_0"]["automated_detection"] == ["The automated detection field is required."]
    assert errors["statement_2"] == {"decision_provision": ["The selected decision provision is invalid."]}
    assert tdb.statements == {}


def test_a_used_puid_refuses_the_batch_listing_existing_puids(tdb):
    """DSA-3 (documented): a puid used before, or twice in the call: 422 with
    errors.existing_puids; none created."""
    assert post(tdb, "/statements", {"statements": [statement(0)]}).status_code == 201
    answer = post(tdb, "/statements", {"statements": [statement(0), statement(1)]})
    assert answer.status_code == 422
    assert answer.json()["errors"]["existing_puids"] == ["puid-0"]
    assert set(tdb.statements) == {"puid-0"}
    twice = post(tdb, "/statements", {"statements": [statement(5), statement(5)]})
    assert twice.json()["errors"]["existing_puids"] == ["puid-5"]
    assert set(tdb.statements) == {"puid-0"}


@pytest.mark.parametrize("count", [0, 101])
def test_a_batch_holds_1_to_100(tdb, count):
    """The multiple endpoint takes 1..100 statements."""
    answer = post(tdb, "/statements", {"statements": [statement(n) for n in range(count)]})
    assert answer.status_code == 422
    assert "statements" in answer.json()["errors"]
    assert tdb.statements == {}


def test_100_is_allowed(tdb):
    assert post(tdb, "/statements", {"statements": [statement(n) for n in range(100)]}).status_code == 201
    assert len(tdb.statements) == 100


def test_the_rate_limit_answers_429(tdb):
    """Beyond the per-second limit (200 documented; 2 here) the answer is 429 with
    Retry-After; a forced 429 for tests likewise."""
    tdb.per_second = 2
    codes = [post(tdb, "/statement", statement(n)).status_code for n in range(3)]
    assert codes == [201, 201, 429]
    tdb.per_second = 200
    tdb.force_429(1, retry_after=7)
    answer = post(tdb, "/statement", statement(9))
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "7"
    assert "puid-9" not in tdb.statements
    assert post(tdb, "/statement", statement(9)).status_code == 201


def test_existing_puid_lookup(tdb):
    """Existing PUID: 302 found, 404 not found."""
    post(tdb, "/statement", documented_example())
    found = requests.get(tdb.base_url + "/statement/existing-puid/TK421", headers=AUTH, allow_redirects=False)
    missing = requests.get(tdb.base_url + "/statement/existing-puid/TK422", headers=AUTH, allow_redirects=False)
    assert (found.status_code, missing.status_code) == (302, 404)
    assert found.json()["puid"] == "TK421"


CROSS_CHECK = [
    {},
    {"territorial_scope": None},
    {"content_date": None},
    {"category": "STATEMENT_CATEGORY_NON_CONSENSUAL_BEHAVIOUR"},
    {"decision_ground": "DECISION_GROUND_ILLEGAL_CONTENT"},
    {"decision_ground": "DECISION_GROUND_ILLEGAL_CONTENT", "illegal_content_explanation": None},
    {"incompatible_content_ground": None},
    {"end_date_monetary_restriction": "2023-08-07"},
    {"end_date_monetary_restriction": "2024-01-01"},
    {"application_date": "2023-13-01"},
    {"puid": "sor-" + "a" * 496},
    {"puid": "sor-" + "a" * 497},
    {"puid": "ü"},
    {"decision_visibility": ["DECISION_VISIBILITY_OTHER"]},
    {"decision_visibility": ["DECISION_VISIBILITY_OTHER"], "decision_visibility_other": "hidden"},
    {"content_type": ["CONTENT_TYPE_OTHER"]},
    {"automated_detection": "Maybe"},
    {"decision_visibility": None, "decision_monetary": None, "decision_provision": None, "decision_account": None},
    {"decision_facts": "x" * 5001},
    {"source_type": "SOURCE_VOLUNTARY", "source_identity": "ignored"},
]


@pytest.mark.parametrize("changes", CROSS_CHECK, ids=[str(i) for i in range(len(CROSS_CHECK))])
def test_the_local_rules_and_the_server_agree(tdb, changes):
    """DSA-2: a statement the console's rules accept is created by the database, and
    one they refuse is refused, for the same fields."""
    body = documented_example(**changes)
    local = statement_problems(body)
    answer = post(tdb, "/statement", body)
    assert answer.status_code == (201 if not local else 422), (local, answer.text)
    if local:
        assert set(answer.json()["errors"]) == set(local)


def test_a_built_statement_is_created(tdb):
    """DSA-2: what `build_statement` makes from valid facts, the database creates."""
    assert post(tdb, "/statement", build_statement(facts())).status_code == 201
