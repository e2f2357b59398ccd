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


# --- evidence: the documented limits at their edges, and what the errors say ---------


def test_rev1_evidence_digest_is_pinned():
    """REV-1: the digest of stored evidence never changes between versions (schema_version 1)."""
    assert evidence_digest(parse_evidence(FULL), "post:1") == (
        "sha256:f672246e8dc367ea6c3fd5db18333ebfa80bf33e7e17e71b740b0ea3450901bd"
    )
    assert evidence_digest(parse_evidence({}), "post:1") == (
        "sha256:ca4872b680052b579dd0b485aec16726dd2225809d99023eb9f31daa4b7e16da"
    )


def test_rev1_the_digest_covers_every_field_as_stored():
    """REV-1: the material is the target and every field, times in ISO-8601 UTC."""
    evidence = parse_evidence(FULL)
    assert evidence.material("post:1") == {
        "schema_version": "1",
        "target_reference": "post:1",
        "content_text": "Hello <b>world</b>",
        "author_reference": "user:42",
        "author_name": "Someone",
        "media": [MEDIA],
        "permalink": "https://example.social/p/1",
        "posted_at": "2026-11-30T08:15:00.000Z",
    }


def test_rev1_evidence_at_its_limits_is_accepted():
    """REV-1: each documented limit is inclusive."""
    longest_mime = "a" * 50 + "/" + "b" * 49
    evidence = parse_evidence(
        {
            "content_text": "x" * 10_000,
            "author_reference": "a" * 50 + ":" + "b" * 440,
            "author_name": "n" * 200,
            "media": [{**MEDIA, "mime_type": longest_mime}] * 10,
            "permalink": "https://" + "x" * (2000 - len("https://")),
        }
    )
    assert len(evidence.content_text) == 10_000 and len(evidence.author_name) == 200
    assert len(evidence.media) == 10 and evidence.media[0].mime_type == longest_mime
    assert len(evidence.permalink) == 2000 and len(evidence.author_reference) == 491


@pytest.mark.parametrize(
    "value, field, message",
    [
        (["not", "an", "object"], "evidence", "evidence must be a JSON object."),
        ({"zeta": 1, "alpha": 2}, "evidence.alpha", "Unknown evidence field: alpha."),
        (
            {"permalink": None, "author_name": None},
            "evidence.author_name",
            "evidence.author_name is null; leave it out instead.",
        ),
        (
            {"content_text": "x" * 10_001},
            "evidence.content_text",
            "evidence.content_text must be text of at most 10,000 characters.",
        ),
        ({"author_name": 5}, "evidence.author_name", "evidence.author_name must be text of at most 200 characters."),
        (
            {"author_reference": "user:" + "4" * 496},
            "evidence.author_reference",
            "evidence.author_reference must be text of at most 500 characters.",
        ),
        (
            {"author_reference": "user 42"},
            "evidence.author_reference",
            "evidence.author_reference must be an account reference like 'user:42'.",
        ),
        (
            {"permalink": "https://example.social/p 1"},
            "evidence.permalink",
            "evidence.permalink must be an http or https URL of at most 2,000 characters.",
        ),
        (
            {"permalink": "https://" + "x" * 1993},
            "evidence.permalink",
            "evidence.permalink must be text of at most 2,000 characters.",
        ),
        ({"media": {"url": "x"}}, "evidence.media", "evidence.media must list at most 10 media references."),
        ({"media": [MEDIA] * 11}, "evidence.media", "evidence.media must list at most 10 media references."),
        ({"media": [MEDIA, "x"]}, "evidence.media[1]", "evidence.media[1] needs exactly url, sha256 and mime_type."),
        (
            {"media": [{"url": MEDIA["url"], "sha256": "a" * 64}]},
            "evidence.media[0]",
            "evidence.media[0] needs exactly url, sha256 and mime_type.",
        ),
        (
            {"media": [MEDIA, {**MEDIA, "url": None}]},
            "evidence.media[1].url",
            "evidence.media[1].url must be an http or https URL.",
        ),
        (
            {"media": [{**MEDIA, "url": "//cdn.example/1.jpg"}]},
            "evidence.media[0].url",
            "evidence.media[0].url must be an http or https URL of at most 2,000 characters.",
        ),
        (
            {"media": [{**MEDIA, "sha256": 5}]},
            "evidence.media[0].sha256",
            "evidence.media[0].sha256 must be 64 lowercase hex digits.",
        ),
        (
            {"media": [{**MEDIA, "sha256": "a" * 63}]},
            "evidence.media[0].sha256",
            "evidence.media[0].sha256 must be 64 lowercase hex digits.",
        ),
        (
            {"media": [{**MEDIA, "mime_type": None}]},
            "evidence.media[0].mime_type",
            "evidence.media[0].mime_type must be a MIME type like image/jpeg.",
        ),
        (
            {"media": [{**MEDIA, "mime_type": "a" * 50 + "/" + "b" * 50}]},
            "evidence.media[0].mime_type",
            "evidence.media[0].mime_type must be a MIME type like image/jpeg.",
        ),
        (
            {"posted_at": 1764490500},
            "evidence.posted_at",
            "evidence.posted_at must be ISO-8601 UTC, e.g. 2026-11-30T08:15:00Z.",
        ),
        (
            {"posted_at": "2026-11-30T08:15Z"},
            "evidence.posted_at",
            "evidence.posted_at must be ISO-8601 UTC, e.g. 2026-11-30T08:15:00Z.",
        ),
        (
            {"posted_at": "2026-02-30T08:15:00Z"},
            "evidence.posted_at",
            "evidence.posted_at is not a real date and time.",
        ),
    ],
)
def test_rev1_refused_evidence_names_the_field_and_the_limit(value, field, message):
    """REV-1: the 400 says which field and which documented limit."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence(value)
    assert (refused.value.field, refused.value.message, str(refused.value)) == (field, message, message)


def test_rev1_errors_name_the_path_given():
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence({"media": [{**MEDIA, "sha256": "x"}]}, "targets[2].evidence")
    assert refused.value.field == "targets[2].evidence.media[0].sha256"


@pytest.mark.parametrize(
    "posted_at, expected",
    [
        ("2026-11-30T08:15:00+00:00", datetime(2026, 11, 30, 8, 15, tzinfo=UTC)),
        ("2026-11-30T08:15:00.5Z", datetime(2026, 11, 30, 8, 15, 0, 500000, tzinfo=UTC)),
        ("2026-11-30T08:15:00.123456Z", datetime(2026, 11, 30, 8, 15, 0, 123456, tzinfo=UTC)),
    ],
)
def test_rev1_posted_at_is_iso8601_utc(posted_at, expected):
    parsed = parse_evidence({"posted_at": posted_at}).posted_at
    assert parsed == expected and parsed.tzinfo is UTC  # UTC whatever the server's own time zone


def test_rev1_a_media_url_may_be_http():
    [media] = parse_evidence({"media": [{**MEDIA, "url": "HTTP://cdn.example/1.jpg"}]}).media
    assert media.url == "HTTP://cdn.example/1.jpg"


# --- labels --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, words",
    [
        ("restrict_account", "Restrict account"),
        ("takedown", "Takedown"),
        ("_private_", "Private"),
        ("a", "A"),
        ("_", "_"),
        ("already Words", "Already Words"),
    ],
)
def test_rev3_a_code_nobody_labelled_reads_as_words(code, words):
    """REV-3: underscores become spaces, the first letter is capitalised; a code of no words stays as it is."""
    assert humanise(code) == words


def test_rev3_label_precedence():
    """REV-3: the installation's label, else the default, else the code in words; nothing reads as empty."""
    assert label_for({("decision", "remove_content"): ""}, "decision", "remove_content") == "Remove content"
    assert label_for({("action", "remove_content"): "Other kind"}, "decision", "remove_content") == "Remove content"
    assert label_for({}, "unknown_kind", "remove_content") == "Remove content"
    assert label_for({}, "decision", "") == "—"


@pytest.mark.parametrize(
    "kind, code, label, problem",
    [
        ("nonsense", "x", "X", ("kind", "Choose what kind of code this labels.")),
        ("decision", "", "X", ("code", "A code is 1 to 200 letters, digits or _ . : - characters.")),
        ("decision", "c" * 201, "X", ("code", "A code is 1 to 200 letters, digits or _ . : - characters.")),
        ("decision", 5, "X", ("code", "A code is 1 to 200 letters, digits or _ . : - characters.")),
        ("decision", "ok\n", "X", ("code", "A code is 1 to 200 letters, digits or _ . : - characters.")),
        ("decision", "ok", "x" * 101, ("label", "A label is 1 to 100 characters.")),
        ("decision", "ok", "", ("label", "A label is 1 to 100 characters.")),
        ("decision", "ok", None, ("label", "A label is 1 to 100 characters.")),
        ("decision", "ok", "tab\there", ("label", "A label cannot hold control characters.")),
        ("decision", "ok", "unit\x1f", ("label", "A label cannot hold control characters.")),
        ("decision", "ok", "del\x7f", ("label", "A label cannot hold control characters.")),
    ],
)
def test_rev3_refused_labels_say_why(kind, code, label, problem):
    """REV-3: the field at fault and a sentence for the admin screen."""
    assert label_problem(kind, code, label) == problem


@pytest.mark.parametrize(
    "kind, code, label",
    [
        ("decision", "c" * 200, "x" * 100),
        ("action", "a", "y"),
        ("proposal_state", "A-Z.0:9_", " ~ Unicode: é — ok ~ "),
        ("authority_mode", "bounded_auto", "  " + "x" * 100 + "  "),
    ],
)
def test_rev3_labels_within_the_limits_are_saved(kind, code, label):
    assert label_problem(kind, code, label) is None


@pytest.mark.parametrize(
    "url, host",
    [
        ("https://a@b@host.example/p", "host.example"),  # the last "@" ends the userinfo
        ("https://platform.example/a//b", "platform.example"),  # "//" in the path is not a host
        ("platform.example/p", "platform.example"),  # no scheme: the authority starts at once
        ("https://ex\u0430mple..social/p", "ex\\u0430mple..social"),  # no DNS form: escaped
    ],
)
def test_four10_the_host_shown_is_the_one_the_link_opens(url, host):
    """FOUR-10: the host beside a link is the one a browser opens, in ASCII; a non-ASCII
    host with no valid DNS form is shown with its characters escaped, never as drawn."""
    from app.domain.evidence import link_host

    assert link_host(url) == host


@pytest.mark.parametrize(
    "url", ["https://platform.example@evil.example/p", "https://user@platform.example/", "https://platform.example\\@x/"]
)
def test_four10_a_link_with_userinfo_is_refused_naming_the_field(url):
    """FOUR-10: ``https://platform.example@evil.example/`` reads as one host and opens
    another: refused with url_userinfo on the field, saying why."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence({"permalink": url}, "targets[0].evidence")
    error = refused.value
    assert (error.code, error.field) == ("url_userinfo", "targets[0].evidence.permalink")
    assert error.message == (
        "targets[0].evidence.permalink must not carry a user name or password before its host (user@host): "
        "the link would read as one host and open another."
    )


def test_four10_a_link_with_a_backslash_in_its_host_is_refused():
    """FOUR-10: browsers read ``\\`` in the authority as ``/``: the host shown would not
    be the one opened."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence({"media": [{**MEDIA, "url": "https://cdn.example\\evil.example/1.jpg"}]})
    assert (refused.value.code, refused.value.field) == ("url_userinfo", "evidence.media[0].url")


def test_four10_an_author_reference_that_looks_like_another_is_refused_naming_the_field():
    """FOUR-10, REV-1: reference_characters on the field, the message naming the character."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence({"author_reference": "user:42\u200b"}, "targets[1].evidence")
    error = refused.value
    assert (error.code, error.field) == ("reference_characters", "targets[1].evidence.author_reference")
    assert error.message.startswith("targets[1].evidence.author_reference contains U+200B ZERO WIDTH SPACE")


def test_rev1_evidence_outside_its_limits_is_report_evidence_invalid():
    """REV-1: any other refusal is 400 report_evidence_invalid."""
    with pytest.raises(EvidenceInvalid) as refused:
        parse_evidence({"author_reference": "no colon"})
    assert refused.value.code == "report_evidence_invalid"
