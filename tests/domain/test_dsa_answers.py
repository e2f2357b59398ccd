"""What the Transparency Database's answer to a batch means for each statement, and
a statement's states (app/domain/dsa_answers.py, SPEC DSA-3)."""

from __future__ import annotations

import json

import pytest

from app.domain.dsa_answers import DSA_STATEMENT, StatementMove, StatementState, read_batch_answer

PUIDS = ["a", "b", "c"]


def body(value) -> bytes:
    return json.dumps(value).encode()


def test_created_statements_are_submitted_with_their_uuid():
    """DSA-3: 201 -> every statement submitted, with the uuid the answer gives."""
    answer = {"statements": [{"puid": "a", "uuid": "u-a"}, {"puid": "b", "uuid": "u-b"}, {"puid": "c"}]}
    verdict = read_batch_answer(PUIDS, 201, body(answer))
    assert verdict.created == {"a": "u-a", "b": "u-b", "c": None}
    assert (verdict.resend, verdict.refused, verdict.retry_after) == ((), {}, None)


def test_a_201_without_a_readable_body_still_means_created():
    """DSA-3: created is created, even when the answer was cut (too large)."""
    assert read_batch_answer(PUIDS, 201, None).created == {"a": None, "b": None, "c": None}


def test_statement_n_errors_dead_letter_those_and_resend_the_rest():
    """DSA-3: errors keyed statement_N name the N-th statement sent."""
    errors = {"statement_1": {"content_date": ["The content date field is required."]}}
    verdict = read_batch_answer(PUIDS, 422, body({"errors": errors}))
    assert verdict.refused == {"b": errors["statement_1"]}
    assert verdict.resend == ("a", "c")
    assert verdict.created == {} and verdict.retry_after is None


def test_existing_puids_are_submitted_and_the_rest_resent():
    """DSA-3: a duplicate puid counts as submitted."""
    answer = {"message": "...", "errors": {"puid": ["..."], "existing_puids": ["c", "zz"]}}
    verdict = read_batch_answer(PUIDS, 422, body(answer))
    assert verdict.existing == frozenset({"c"})
    assert verdict.resend == ("a", "b")


@pytest.mark.parametrize(
    "status, payload, error",
    [
        (429, b"Limit Reached. Please do not overload the API", "tdb_rate_limited"),
        (401, body({"message": "Unauthenticated."}), "tdb_unauthorized"),
        (503, b"", "tdb_unavailable"),
        (None, None, "tdb_unavailable"),
        (422, body({"errors": {"statements": ["The statements field is required."]}}), "tdb_batch_refused"),
        (422, b"not json", "tdb_batch_refused"),
        (404, b"", "tdb_http_404"),
    ],
)
def test_anything_else_sends_everything_again_later(status, payload, error):
    """DSA-3: 429, 5xx, no answer, a wrong token or an unexpected refusal change no
    statement and ask to wait (the answer's Retry-After)."""
    verdict = read_batch_answer(PUIDS, status, payload, retry_after=7.0)
    assert verdict.resend == tuple(PUIDS)
    assert (verdict.created, verdict.existing, verdict.refused) == ({}, frozenset(), {})
    assert (verdict.retry_after, verdict.error) == (7.0, error)


def test_a_statement_moves_only_by_its_table():
    """DSA-3: pending -> submitted or dead letter; a dead letter back to pending
    when corrected; a submitted statement never moves again."""
    S = StatementState
    assert {move: (set(DSA_STATEMENT.sources(move)), DSA_STATEMENT.target(move)) for move in StatementMove} == {
        StatementMove.SUBMIT: ({S.PENDING}, S.SUBMITTED),
        StatementMove.DEAD_LETTER: ({S.PENDING}, S.DEAD_LETTER),
        StatementMove.REQUEUE: ({S.DEAD_LETTER}, S.PENDING),
    }
    assert not any(DSA_STATEMENT.can(move, S.SUBMITTED) for move in StatementMove)
