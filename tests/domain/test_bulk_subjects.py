"""BULK-1: a pasted or uploaded list of subjects and a report filter, answered line by
line and field by field (app/domain/bulk)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.domain.bulk.report_filter import ReportFilter, parse_report_filter
from app.domain.bulk.subjects import (
    MAX_SELECTION_CHARS,
    LineError,
    SubjectLine,
    parse_subject_list,
    subject_kind,
)
from app.domain.errors import ApiError


def codes(errors: list[LineError]) -> list[tuple[int, str]]:
    return [(error.line, error.code) for error in errors]


def test_bulk_1_one_reference_per_line_with_blanks_and_comments():
    """BULK-1: blank lines and # comments are skipped; line numbers are the input's."""
    text = "# spam wave 12\npost:1001\n\n  user:42  \n# end\nat://did:plc:abc/app.bsky.feed.post/3k\n"
    subjects, errors = parse_subject_list(text, cap=10)
    assert errors == []
    assert subjects == [
        SubjectLine(2, "post:1001", "post"),
        SubjectLine(4, "user:42", "user"),
        SubjectLine(6, "at://did:plc:abc/app.bsky.feed.post/3k", "record"),
    ]


def test_bulk_1_windows_line_endings_and_byte_order_mark():
    """BULK-1: a file saved on Windows (CRLF, UTF-8 BOM) reads like any other."""
    subjects, errors = parse_subject_list("\ufeffpost:1\r\npost:2\r\n\r\n", cap=10)
    assert errors == []
    assert [(s.line, s.reference) for s in subjects] == [(1, "post:1"), (2, "post:2")]


def test_bulk_1_csv_with_reference_and_kind_columns():
    """BULK-1: a CSV header with `reference` and `kind` (any order, other columns
    ignored); an empty kind cell is derived from the reference."""
    text = (
        "\ufeffnote,Kind,Reference\r\n"
        "wave 1,author_of,post:1001\r\n"
        '"a, quoted note",,user:42\r\n'
        "# skipped\r\n"
        ",, did:plc:xyz \r\n"
    )
    subjects, errors = parse_subject_list(text, cap=10)
    assert errors == []
    assert subjects == [
        SubjectLine(2, "post:1001", "author_of"),
        SubjectLine(3, "user:42", "user"),
        SubjectLine(5, "did:plc:xyz", "account"),
    ]


def test_bulk_1_csv_without_kind_column_derives_the_kind():
    """BULK-1: a CSV with only a reference column; the header may follow a comment."""
    subjects, errors = parse_subject_list("# export\nreference\npost:7\nuser:8\n", cap=10)
    assert errors == []
    assert [(s.line, s.reference, s.kind) for s in subjects] == [(3, "post:7", "post"), (4, "user:8", "user")]


def test_bulk_1_csv_row_without_reference_and_bad_kind_are_refused():
    """BULK-1: a row naming no reference, a kind that is no kind (bulk_kind_invalid)."""
    subjects, errors = parse_subject_list("reference,kind\n,post\npost:1,Post Kind\npost:2,post\n", cap=10)
    assert codes(errors) == [(2, "bulk_reference_invalid"), (3, "bulk_kind_invalid")]
    assert [s.reference for s in subjects] == ["post:2"]


@pytest.mark.parametrize(
    ("reference", "kind"),
    [
        ("post:1001", "post"),
        ("User:42", "user"),
        ("did:plc:abc123", "account"),
        ("at://did:plc:abc/app.bsky.feed.post/3k", "record"),
        ("at://did:plc:abc", "account"),
        ("ev-1:x", "content"),  # a prefix that is no kind: the intake's default
        ("9lives:x", "content"),
    ],
)
def test_bulk_1_subject_kind_is_derived_like_report_targets(reference, kind):
    """BULK-1: did: is a PDS account, at:// a PDS record, else the reference's type."""
    assert subject_kind(reference) == kind


@pytest.mark.parametrize(
    "line", ["post 1001", "1001", ":1001", "post:", "post:10 01", "x" * 51 + ":1", "post:" + "1" * 441]
)
def test_bulk_1_reference_of_the_wrong_form_is_invalid(line):
    """BULK-1: the intake's reference rule (type:id, no spaces, length limits)."""
    subjects, errors = parse_subject_list(f"post:1\n{line}\n", cap=10)
    assert codes(errors) == [(2, "bulk_reference_invalid")]
    assert "e.g. post:1001" in errors[0].message


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("post:1001\u200b", "U+200B ZERO WIDTH SPACE (invisible) at position 9"),
        ("p\u043est:1001", "U+043E CYRILLIC SMALL LETTER O (lookalike) at position 1"),
        ("user:\u202e2434", "U+202E RIGHT-TO-LEFT OVERRIDE (bidi) at position 5"),
        ("post:1001\u00a0", "U+00A0 NO-BREAK SPACE (lookalike) at position 9"),
    ],
)
def test_bulk_1_suspicious_characters_are_refused_by_name(line, named):
    """BULK-1, FOUR-10: a reference that would look like another is refused, naming the character."""
    subjects, errors = parse_subject_list(line, cap=10)
    assert codes(errors) == [(1, "bulk_reference_suspicious")]
    assert named in errors[0].message
    assert subjects == []


def test_bulk_1_duplicates_name_the_first_line():
    """BULK-1: the second and later lines naming a subject are refused, naming the first."""
    subjects, errors = parse_subject_list("post:1\npost:2\npost:1\n\npost:1\n", cap=10)
    assert codes(errors) == [(3, "bulk_subject_duplicate"), (5, "bulk_subject_duplicate")]
    assert all("line 1." in error.message for error in errors)
    assert [s.reference for s in subjects] == ["post:1", "post:2"]


def test_bulk_1_over_the_cap_is_one_error_at_the_first_line_past_it():
    """BULK-1, BULK-5: 5,000 subjects over a cap of 1,000 give one error, not 4,000."""
    text = "\n".join(f"post:{n}" for n in range(1, 5001))
    subjects, errors = parse_subject_list(text, cap=1000)
    assert codes(errors) == [(1001, "bulk_selection_over_cap")]
    assert "1,000" in errors[0].message and "5,000" in errors[0].message
    assert errors[0].excerpt == "post:1001"
    assert len(subjects) == 1000


def test_bulk_1_over_the_cap_keeps_the_other_errors_in_line_order():
    """BULK-1: duplicates are not new subjects; bad lines past the cap are still answered."""
    subjects, errors = parse_subject_list("post:1\npost:1\npost:2\npost:3\nbad line\n", cap=1)
    assert codes(errors) == [
        (2, "bulk_subject_duplicate"),
        (3, "bulk_selection_over_cap"),
        (5, "bulk_reference_invalid"),
    ]
    assert [s.reference for s in subjects] == ["post:1"]


def test_bulk_1_exactly_the_cap_is_accepted():
    """BULK-1: the cap itself is allowed."""
    subjects, errors = parse_subject_list("post:1\npost:2\npost:1\n", cap=2)
    assert codes(errors) == [(3, "bulk_subject_duplicate")]
    assert len(subjects) == 2


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "reference,kind\n", "\ufeff\r\n"])
def test_bulk_1_empty_selection_is_one_error_on_line_0(text):
    """BULK-1: no subject and no bad line: bulk_selection_empty."""
    subjects, errors = parse_subject_list(text, cap=10)
    assert subjects == [] and codes(errors) == [(0, "bulk_selection_empty")]
    assert errors[0].excerpt == "" and "names no subject" in errors[0].message


def test_bulk_1_too_large_input_is_one_error_on_line_0():
    """BULK-1: over 1,000,000 characters nothing is read."""
    text = "post:1\n" * (MAX_SELECTION_CHARS // 7 + 1)
    subjects, errors = parse_subject_list(text, cap=100_000)
    assert subjects == [] and codes(errors) == [(0, "bulk_selection_too_large")]


def test_bulk_1_excerpt_is_the_line_shortened_to_120_characters():
    """BULK-1: a long bad line is shown back cut, with an ellipsis."""
    line = "bad " + "x" * 300
    _, errors = parse_subject_list(line, cap=10)
    assert len(errors[0].excerpt) == 120 and errors[0].excerpt.startswith("bad xxx") and errors[0].excerpt.endswith("…")


def test_bulk_1_a_line_break_character_inside_a_line_is_not_a_line_break():
    """BULK-1, FOUR-10: only \\n ends a line; a line separator (a space to the intake's
    rule) or a form feed (invisible) inside a line is refused, not split into two subjects."""
    subjects, errors = parse_subject_list("post:1\u2028post:2\npost:3\x0cpost:4\n", cap=10)
    assert codes(errors) == [(1, "bulk_reference_invalid"), (2, "bulk_reference_suspicious")]
    assert subjects == []


# -- the report filter ------------------------------------------------------------------


def test_bulk_1_report_filter_reads_every_criterion_and_round_trips():
    """BULK-1: every criterion, times in UTC to the millisecond; as_dict reads back equal."""
    parsed = parse_report_filter(
        {
            "category": " spam ",
            "queue": "general",
            "target_reference": "post:1001",
            "author_reference": "user:42",
            "received_from": "2026-12-01T09:00:00.123456+01:00",
            "received_to": "2026-12-02T00:00:00Z",
            "integration": "int_123",
        }
    )
    assert parsed == ReportFilter(
        category="spam",
        queue="general",
        target_reference="post:1001",
        author_reference="user:42",
        received_from=datetime(2026, 12, 1, 8, 0, 0, 123000, tzinfo=UTC),
        received_to=datetime(2026, 12, 2, tzinfo=UTC),
        integration="int_123",
    )
    assert parsed.as_dict()["received_from"] == "2026-12-01T08:00:00.123Z"
    assert parse_report_filter(parsed.as_dict()) == parsed


def test_bulk_1_report_filter_drops_blank_and_null_criteria():
    """BULK-1: a form's empty fields are no criteria; as_dict leaves them out."""
    parsed = parse_report_filter({"category": "spam", "queue": "", "received_from": "  ", "integration": None})
    assert parsed.as_dict() == {"category": "spam"}


def test_bulk_1_report_filter_takes_aware_datetimes():
    """BULK-1: a datetime with a zone is taken as is, in UTC."""
    when = datetime(2026, 12, 1, 10, tzinfo=timezone(timedelta(hours=2)))
    assert parse_report_filter({"received_from": when}).received_from == datetime(2026, 12, 1, 8, tzinfo=UTC)


@pytest.mark.parametrize(
    ("values", "field", "says"),
    [
        ({"category": "spam", "colour": "red"}, "colour", "Unknown filter field"),
        ({"category": 7}, "category", "must be text"),
        ({"queue": "q" * 501}, "queue", "at most 500"),
        ({"received_from": "yesterday"}, "received_from", "ISO-8601"),
        ({"received_from": "2026-13-01T00:00:00Z"}, "received_from", "ISO-8601"),
        ({"received_to": "2026-12-01T08:00:00"}, "received_to", "with a time zone, e.g. 2026-12-01T08:00:00Z"),
        ({"received_from": datetime(2026, 12, 1)}, "received_from", "with a time zone"),
        ({"received_from": "2026-12-02T00:00Z", "received_to": "2026-12-01T00:00Z"}, "received_to", "ends before"),
        ({"target_reference": "post 1"}, "target_reference", "not a subject reference"),
        ({"author_reference": "user:4\u200b2"}, "author_reference", "ZERO WIDTH SPACE"),
    ],
)
def test_bulk_1_report_filter_refuses_a_bad_field_by_name(values, field, says):
    """BULK-1: bulk_filter_invalid naming the field, with a sentence saying what is wrong."""
    with pytest.raises(ApiError) as caught:
        parse_report_filter(values)
    assert (caught.value.status, caught.value.code, caught.value.field) == (400, "bulk_filter_invalid", field)
    assert says in caught.value.message


@pytest.mark.parametrize("values", [{}, {"category": "", "queue": None}, {"received_from": " "}])
def test_bulk_1_report_filter_needs_a_criterion(values):
    """BULK-1: a filter with no criterion would select every open report: bulk_filter_empty."""
    with pytest.raises(ApiError) as caught:
        parse_report_filter(values)
    assert (caught.value.status, caught.value.code) == (400, "bulk_filter_empty")


def test_bulk_1_report_filter_must_be_an_object():
    """BULK-1: a JSON list or text is refused, not a 500."""
    for value in (["category"], "category=spam", None):
        with pytest.raises(ApiError) as caught:
            parse_report_filter(value)
        assert caught.value.code == "bulk_filter_invalid"
