"""The pure rules behind what a reviewer sees: evidence limits and digest (REV-1),
labels for codes (REV-3), a receipt as the platform sent it (REV-6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.evidence import (
    MAX_CONTENT_TEXT,
    MAX_MEDIA,
    EvidenceInvalid,
    evidence_digest,
    parse_evidence,
)
from app.domain.labels import DEFAULT_LABELS, humanise, label_for, label_problem
from app.domain.receipts import ProposalIdentity, parse_receipt

MEDIA = {"url": "https://cdn.example/p/1.jpg", "sha256": "a" * 64, "mime_type": "image/jpeg"}
FULL = {
    "content_text": "Hello <b>world</b>",
    "author_reference": "user:42",
    "author_name": "Someone",
    "media": [MEDIA],
    "permalink": "https://example.social/p/1",
    "posted_at": "2026-11-30T08:15:00Z",
}


def test_evidence_parses_every_field():
    """REV-1: content text, author, media (URL, SHA-256, MIME type), permalink, posted time."""
    evidence = parse_evidence(FULL)
    assert evidence.content_text == "Hello <b>world</b>"
    assert (evidence.author_reference, evidence.author_name) == ("user:42", "Someone")
    assert [(m.url, m.sha256, m.mime_type) for m in evidence.media] == [(MEDIA["url"], "a" * 64, "image/jpeg")]
    assert evidence.permalink == "https://example.social/p/1"
    assert evidence.posted_at == datetime(2026, 11, 30, 8, 15, tzinfo=UTC)
    assert parse_evidence({}).content_text is None


@pytest.mark.parametrize(
    "value, field",
    [
        ({"content_text": "x" * (MAX_CONTENT_TEXT + 1)}, "evidence.content_text"),
        ({"content_text": 5}, "evidence.content_text"),
        ({"author_reference": "no colon"}, "evidence.author_reference"),
        ({"author_name": "n" * 201}, "evidence.author_name"),
        ({"media": [MEDIA] * (MAX_MEDIA + 1)}, "evidence.media"),
        ({"media": [{**MEDIA, "url": "javascript:alert(1)"}]}, "evidence.media[0].url"),
        ({"media": [{**MEDIA, "url": None}]}, "evidence.media[0].url"),  # found by schemathesis
        ({"media": [{**MEDIA, "sha256": "A" * 64}]}, "evidence.media[0].sha256"),
        ({"media": [{**MEDIA, "mime_type": "jpeg"}]}, "evidence.media[0].mime_type"),
        ({"media": [{"url": MEDIA["url"]}]}, "evidence.media[0]"),
        ({"media": [{**MEDIA, "extra": 1}]}, "evidence.media[0]"),
        ({"permalink": "ftp://example/p"}, "evidence.permalink"),
        ({"permalink": "https://" + "x" * 2000}, "evidence.permalink"),
        ({"posted_at": "2026-11-30T08:15:00+02:00"}, "evidence.posted_at"),
        ({"posted_at": "2026-13-30T08:15:00Z"}, "evidence.posted_at"),
        ({"posted_at": "yesterday"}, "evidence.posted_at"),
        ({"content_text": None}, "evidence.content_text"),
        ({"surprise": "x"}, "evidence.surprise"),
    ],
)
def test_evidence_beyond_its_limits_is_refused(value, field):
    """REV-1: documented limits; the error names the field at fault."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence(value)
    assert refused.value.field == field


def test_evidence_digest_names_exactly_what_was_sent():
    """REV-1: the digest covers every field and the target; the same evidence gives the same digest."""
    first = evidence_digest(parse_evidence(FULL), "post:1")
    assert first.startswith("sha256:") and len(first) == 71
    assert evidence_digest(parse_evidence(dict(FULL)), "post:1") == first
    assert evidence_digest(parse_evidence({**FULL, "content_text": "Hello world"}), "post:1") != first
    assert evidence_digest(parse_evidence(FULL), "post:2") != first


def test_labels_come_from_configuration_with_defaults():
    """REV-3: configured label, else the default, else the code in words."""
    configured = {("proposal_state", "applied"): "Done on the platform"}
    assert label_for(configured, "proposal_state", "applied") == "Done on the platform"
    assert label_for({}, "proposal_state", "applied") == DEFAULT_LABELS["proposal_state"]["applied"]
    assert label_for({}, "decision", "suspend_for_spam") == "Suspend for spam" == humanise("suspend_for_spam")
    assert label_for({}, "approval_mode", "human") == "A second person approves"
    assert label_for({}, "action", None) == "—"


@pytest.mark.parametrize(
    "kind, code, label, field",
    [
        ("nonsense", "x", "X", "kind"),
        ("decision", "has space", "X", "code"),
        ("decision", "ok", "x" * 101, "label"),
        ("decision", "ok", "   ", "label"),
        ("decision", "ok", "bell\x07", "label"),
    ],
)
def test_bad_labels_are_refused(kind, code, label, field):
    """REV-3: a label is 1..100 characters for a known kind and a code of safe characters."""
    assert label_problem(kind, code, label)[0] == field
    assert label_problem("decision", "remove_content", "Take it down") is None


def test_receipt_as_sent_shows_no_defaults():
    """REV-6: the stored receipt holds the fields the platform sent, not defaults it did not send."""
    identity = ProposalIdentity("a", "op", "sha256:" + "0" * 64)
    base = {"action_id": "a", "operation_id": "op", "payload_digest": identity.payload_digest}
    applied = parse_receipt({**base, "status": "applied", "provider_request_id": "p-1"}, identity)
    assert applied.as_sent() == {**base, "status": "applied", "provider_request_id": "p-1"}
    assert applied.as_dict()["retry_after_seconds"] == 30  # the logic still has its default
    failed = parse_receipt({**base, "status": "failed", "terminal": False, "retry_after_seconds": 60.0}, identity)
    assert failed.as_sent() == {**base, "status": "failed", "terminal": False, "retry_after_seconds": 60}
    assert failed.error_code == "action_provider_failed" and "error_code" not in failed.as_sent()
