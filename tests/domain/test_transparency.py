"""The transparency report's figures from plain rows (app/domain/transparency.py,
SPEC DSA-6): periods of whole UTC days, nearest-rank percentiles, counts."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from app.domain.errors import ApiError
from app.domain.transparency import (
    AppealRow,
    Period,
    StatementRow,
    last_full_month,
    nearest_rank,
    parse_period,
    report_of,
)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_nearest_rank_percentiles_DSA_6():
    """DSA-6: the value at rank ceil(p·n/100); the median of an even count is the
    lower middle; 90 % of 10 values is the 9th (no float rounding to the 10th)."""
    assert nearest_rank([], 50) is None
    assert nearest_rank([7], 50) == 7 and nearest_rank([7], 90) == 7
    assert nearest_rank([4, 1, 3, 2], 50) == 2
    assert nearest_rank(list(range(1, 11)), 90) == 9
    assert nearest_rank(list(range(1, 11)), 91) == 10
    assert nearest_rank([5, 1, 9], 50) == 5
    assert nearest_rank(list(range(1, 21)), 90) == 18
    with pytest.raises(ValueError):
        nearest_rank([1], 0)


def test_a_period_is_whole_utc_days_end_excluded_DSA_6():
    """DSA-6: [from, to) from midnight UTC; the default is the last full calendar month."""
    period = parse_period("2026-11-01", "2026-12-01")
    assert period == Period(date(2026, 11, 1), date(2026, 12, 1))
    assert period.holds(at("2026-11-01T00:00:00")) and period.holds(at("2026-11-30T23:59:59.999999"))
    assert not period.holds(at("2026-12-01T00:00:00")) and not period.holds(at("2026-10-31T23:59:59"))
    assert last_full_month(date(2026, 12, 3)) == period
    assert last_full_month(date(2026, 1, 31)) == Period(date(2025, 12, 1), date(2026, 1, 1))


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("", "2026-12-01", "from"),
        ("2026-11-1", "2026-12-01", "from"),
        ("2026-02-30", "2026-03-01", "from"),
        ("01/11/2026", "2026-12-01", "from"),
        ("2026-11-01", None, "to"),
        ("2026-11-01", "2026-11-01", "to"),
        ("2026-11-02", "2026-11-01", "to"),
        ("1999-12-31", "2000-01-02", "from"),
        ("2000-01-01", "2030-01-01", "to"),
        ("2026-11-01T00:00", "2026-12-01", "from"),
    ],
)
def test_a_bad_period_is_refused_in_words_DSA_6(start, end, field):
    """DSA-6: a day not YYYY-MM-DD, an end not after the start, or too long a period:
    400 transparency_period_invalid naming the field."""
    with pytest.raises(ApiError) as refused:
        parse_period(start, end)
    error = refused.value
    assert (error.status, error.code, error.field) == (400, "transparency_period_invalid", field)
    assert refused.value.message.endswith(".")


def row(category="STATEMENT_CATEGORY_VIOLENCE", restriction_type="DECISION_ACCOUNT_SUSPENDED", *, applied, waited=None,
        detection=False, decision="AUTOMATED_DECISION_NOT_AUTOMATED"):
    restriction = restriction_type.split("_")[1].lower()
    reported = None if waited is None else datetime.fromtimestamp(applied.timestamp() - waited, UTC)
    return StatementRow(category, "DECISION_GROUND_ILLEGAL_CONTENT", restriction, restriction_type, decision, detection,
                        applied, reported)


def test_counts_times_and_suspensions_of_plain_rows_DSA_6():
    """DSA-6: only statements applied in the period count; every listed value appears
    (0 included); an unknown value is kept under its own label; times are whole seconds."""
    period = parse_period("2026-11-01", "2026-12-01")
    rows = [
        row(applied=at("2026-11-02T00:00:00"), waited=100, detection=True),
        row(restriction_type="DECISION_PROVISION_TOTAL_SUSPENSION", applied=at("2026-11-03T00:00:00"), waited=300),
        row(category="STATEMENT_CATEGORY_OLD_V1", restriction_type="DECISION_VISIBILITY_CONTENT_REMOVED",
            applied=at("2026-11-04T00:00:00")),
        row(applied=at("2026-12-01T00:00:00"), waited=5),
    ]
    report = report_of(period, rows, [])
    assert report.section("statements").value("total") == 3
    category = report.section("category")
    assert category.value("STATEMENT_CATEGORY_VIOLENCE") == 2 and category.value("STATEMENT_CATEGORY_SELF_HARM") == 0
    assert category.value("STATEMENT_CATEGORY_OLD_V1") == 1
    assert [f.label for f in category.figures][-1] == "Not in the API v2 list"
    assert len(category.figures) == 17
    assert report.section("automated_detection").value("Yes") == 1
    assert report.section("restriction").value("provision") == 1
    times = report.section("time_to_action")
    assert (times.value("measured"), times.value("median_seconds"), times.value("p90_seconds")) == (2, 100, 300)
    suspensions = report.section("suspensions")
    assert (suspensions.value("account"), suspensions.value("provision"), suspensions.value("total")) == (1, 1, 2)


def test_appeals_received_decided_and_reversed_DSA_6():
    """DSA-6: received = filed in the period, decided = decision made in it (filing →
    decision for the median), reversed = decided in it with the outcome reversed."""
    period = parse_period("2026-11-01", "2026-12-01")
    appeals = [
        AppealRow(at("2026-10-31T00:00:00"), at("2026-11-01T00:00:00"), "reversed"),
        AppealRow(at("2026-11-05T00:00:00"), None, None),
        AppealRow(at("2026-11-06T00:00:00"), at("2026-11-06T00:10:00"), "upheld"),
        AppealRow(at("2026-11-30T00:00:00"), at("2026-12-01T00:00:00"), "reversed"),
    ]
    section = report_of(period, [], appeals).section("appeals")
    assert section.value("received") == 3 and section.value("decided") == 2
    assert section.value("median_seconds_to_decide") == 600  # lower middle of [600, 86400]
    assert (section.value("decided_upheld"), section.value("decided_modified"), section.value("reversed")) == (1, 0, 1)
    empty = report_of(period, [], []).section("appeals")
    assert empty.value("median_seconds_to_decide") is None and empty.value("received") == 0


def test_every_figure_is_a_csv_line_DSA_6():
    """DSA-6: (section, key, label, value) for every figure; keys unique per section."""
    report = report_of(parse_period("2026-11-01", "2026-12-01"), [], [])
    lines = report.rows()
    assert len({(s, k) for s, k, _, _ in lines}) == len(lines)
    assert {s for s, *_ in lines} == {
        "statements", "category", "ground", "restriction", "restriction_type", "automated_decision",
        "automated_detection", "time_to_action", "appeals", "suspensions",
    }
    assert all(label for _, _, label, _ in lines)


def test_every_figure_of_a_section_has_its_own_label_DSA_6():
    """DSA-6: a reader tells the rows apart by their words: the two "Other restriction"
    types name their restriction, and labels read in sentence case."""
    report = report_of(parse_period("2026-11-01", "2026-12-01"), [], [])
    for section in report.sections:
        labels = [f.label for f in section.figures]
        assert len(set(labels)) == len(labels), (section.key, labels)
    words = {(s.key, f.key): f.label for s in report.sections for f in s.figures}
    assert words["restriction_type", "DECISION_VISIBILITY_OTHER"] == "Other restriction of the visibility of content"
    assert words["restriction_type", "DECISION_MONETARY_OTHER"] == "Other restriction of monetary payments"
    assert words["automated_decision", "AUTOMATED_DECISION_NOT_AUTOMATED"] == "Not automated"
    assert words["ground", "DECISION_GROUND_ILLEGAL_CONTENT"] == "Illegal content"
