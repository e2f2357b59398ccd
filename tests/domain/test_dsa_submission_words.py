"""A statement's submission in words (app/domain/dsa_submission_words.py, SPEC DSA-3)."""

from __future__ import annotations

from app.domain.dsa_submission_words import refusal_lines, submission_words


def test_dsa3_a_refusal_reads_field_by_field_in_the_databases_words():
    """DSA-3: the database's statement_N errors become (field in words, message)
    lines, in its order; a code reads as a sentence; nothing is empty."""
    error = '{"content_date": ["The content date field is required."], "category": ["a", "b"]}'
    assert refusal_lines(error) == [
        ("content date", "The content date field is required."),
        ("category", "a"),
        ("category", "b"),
    ]
    assert refusal_lines('{"statement": "refused"}') == [("statement", "refused")]
    assert refusal_lines(None) == [] and refusal_lines("") == []
    assert refusal_lines("tdb_existing_puid")[0][1].startswith("The Transparency Database already held it")
    assert refusal_lines("[1, 2]") == [("", "[1, 2].")]


def test_dsa3_submission_codes_read_as_sentences():
    """DSA-3: every stop of a run has words; an HTTP status names itself; an unknown
    code reads as itself in words."""
    assert "asked to wait" in submission_words("tdb_rate_limited")
    assert "allowed hosts" in submission_words("egress_host_not_allowed")
    assert submission_words("tdb_http_418") == "The Transparency Database answered HTTP 418; the sweep tries again."
    assert submission_words("something_new") == "Something new."
    assert submission_words(None) is None
