"""The transparency report from the console's records (app/services/read/
transparency_report.py, SPEC DSA-6): a known history, every figure checked against a
count made here, and SQL's grouped counts held equal to the domain's on the same rows."""

from __future__ import annotations

from collections import Counter

from app.domain import dsa
from app.domain.transparency import ALL_RESTRICTION_TYPES, RESTRICTIONS, parse_period, report_of
from app.extensions import db
from app.services.read.transparency_report import appeal_rows, statement_rows, transparency_report
from tests.builders import make_world
from tests.transparency_history import APPEALS, NOVEMBER, STATEMENTS, build_history


def expected_figures() -> dict[tuple[str, str], int | None]:
    """Every figure of November 2026, counted from the history's own lists."""
    start, end = (parse_period(*NOVEMBER).starts_at, parse_period(*NOVEMBER).ends_at)
    made = [m for m in STATEMENTS if start <= m.applied_at < end]
    assert len(made) == 8  # the two outside November are left out
    want: dict[tuple[str, str], int | None] = {("statements", "total"): len(made)}
    for section, attribute, listed in (
        ("category", "category", dsa.STATEMENT_CATEGORIES),
        ("ground", "ground", dsa.DECISION_GROUNDS),
        ("restriction", "restriction", RESTRICTIONS),
        ("restriction_type", "restriction_type", ALL_RESTRICTION_TYPES),
        ("automated_decision", "automated_decision", dsa.AUTOMATED_DECISIONS),
    ):
        counted = Counter(getattr(m, attribute) for m in made)
        want.update({(section, str(code)): counted[str(code)] for code in listed})
    want[("automated_detection", "Yes")] = sum(m.automated_detection for m in made)
    want[("automated_detection", "No")] = sum(not m.automated_detection for m in made)
    # waits in November, sorted: 60 120 300 600 1800 3600 86400 (7): ranks 4 and 7
    want.update({("time_to_action", "measured"): 7, ("time_to_action", "median_seconds"): 600,
                 ("time_to_action", "p90_seconds"): 86400})
    received = [a for a in APPEALS if start <= a[0] < end]
    decided = [a for a in APPEALS if a[1] is not None and start <= a[1] < end]
    assert (len(received), len(decided)) == (5, 4)
    want.update({("appeals", "received"): 5, ("appeals", "decided"): 4,
                 # filing → decision: 14 days, 2 h, 1 day, 30 min; sorted, rank 2 of 4: 2 h
                 ("appeals", "median_seconds_to_decide"): 7200,
                 ("appeals", "decided_upheld"): 1, ("appeals", "decided_modified"): 1,
                 ("appeals", "decided_reversed"): 2, ("appeals", "reversed"): 2})
    # one account suspended; a partial and a total suspension of the provision
    want.update({("suspensions", "account"): 1, ("suspensions", "provision"): 2, ("suspensions", "total"): 3})
    return want


def test_every_figure_of_a_known_history_DSA_6(app, world):
    """DSA-6: counts by category, ground, restriction (and type), automated decision
    and detection; median and p90 from report to action; appeals received, decided,
    median to decide, by outcome, reversed; suspensions: each equals the count made
    independently from the history (rows outside the period left out)."""
    build_history(world)
    report = transparency_report(db.session, world.installation_id, parse_period(*NOVEMBER))
    got = {(section, key): value for section, key, _label, value in report.rows()}
    assert got == expected_figures()


def test_sql_counts_equal_the_domain_counts_on_the_same_rows_DSA_6(app, world):
    """DSA-6: the service's grouped SQL counts and loaded durations give the same
    report as the domain counting the period's rows one by one."""
    build_history(world)
    for period in (parse_period(*NOVEMBER), parse_period("2026-10-01", "2026-12-02"),
                   parse_period("2026-11-15", "2026-11-16")):
        by_sql = transparency_report(db.session, world.installation_id, period)
        rows = statement_rows(db.session, world.installation_id, period)
        by_domain = report_of(period, rows, appeal_rows(db.session, world.installation_id, period))
        assert by_sql == by_domain, period


def test_another_installation_s_records_are_not_counted_DSA_6(app, world, platform):
    """DSA-6: the report reads one installation's records: another installation with
    the same history leaves every figure as it was, and has its own."""
    build_history(world)
    other = make_world(platform.url, slug="other")
    build_history(other)
    period = parse_period(*NOVEMBER)
    mine = {(s, k): v for s, k, _label, v in transparency_report(db.session, world.installation_id, period).rows()}
    theirs = {(s, k): v for s, k, _label, v in transparency_report(db.session, other.installation_id, period).rows()}
    assert mine == theirs == expected_figures()
