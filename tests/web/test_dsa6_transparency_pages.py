"""The transparency report page and its CSV (app/web/console/transparency.py, SPEC
DSA-6): admins and auditors read the figures of a period as tables, bar charts and a
CSV attachment with the same figures; a bad period is refused in words, never a 500."""

from __future__ import annotations

import csv
import io
import re

import pytest

from app.domain.transparency import parse_period
from app.extensions import db
from app.services.read.transparency_report import transparency_report
from tests.builders import login
from tests.transparency_history import NOVEMBER, build_history

QUERY = f"from={NOVEMBER[0]}&to={NOVEMBER[1]}"


def test_the_csv_holds_every_figure_of_the_page_DSA_6(app, world, client):
    """DSA-6: one line per figure (section, key, label, value), the same figures as the
    report, seconds for times, an attachment named after the period."""
    build_history(world)
    login(client, "auditor@example.com")
    response = client.get(f"/transparency.csv?{QUERY}")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"] == (
        'attachment; filename="transparency-2026-11-01-to-2026-11-30.csv"'
    )
    lines = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    assert lines[0] == ["section", "key", "label", "value"]
    report = transparency_report(db.session, world.installation_id, parse_period(*NOVEMBER))
    assert lines[1:] == [[s, k, label, "" if v is None else str(v)] for s, k, label, v in report.rows()]
    by_key = {(s, k): v for s, k, _label, v in lines[1:]}
    assert by_key[("statements", "total")] == "8" and by_key[("time_to_action", "p90_seconds")] == "86400"
    assert by_key[("appeals", "reversed")] == "2" and by_key[("suspensions", "total")] == "3"


def test_the_page_shows_the_figures_with_labels_and_charts_DSA_6(app, world, client):
    """DSA-6: each figure in a table under its label (no raw code shown for a known
    value); charts as inline SVG with a <title>, one bar per value above 0; no
    style attribute (CSP); the CSV link carries the period."""
    build_history(world)
    login(client, "admin@example.com")
    page = client.get(f"/transparency?{QUERY}").get_data(as_text=True)
    assert "From <strong>2026-11-01</strong> to <strong>2026-11-30</strong> included (30 days)" in page
    assert 'href="/transparency.csv?from=2026-11-01&amp;to=2026-12-01"' in page
    assert "Scams and/or fraud" in page and "Content incompatible with terms and conditions" in page
    row = re.search(r'<tr data-key="STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"[^>]*>(.*?)</tr>', page, re.S)
    assert "Illegal or harmful speech" in row.group(1) and 'data-value="4"' in row.group(1)
    assert ">STATEMENT_CATEGORY_" not in page  # codes live in attributes only (REV-3)
    charts = dict(re.findall(r'<svg class="chart" id="chart-(\w+)" data-bars="(\d+)"', page))
    # categories: speech, scams, violence, minors; grounds: 2; restrictions: 4; automation: 3; outcomes: 3
    assert charts == {"category": "4", "ground": "2", "restriction": "4", "automated_decision": "3", "appeals": "3"}
    assert page.count("<title id=\"chart-") == 5 and page.count('class="chart-bar"') == 16
    assert "style=" not in page
    assert "10m 00s" in page and "1d 00h" in page  # median and p90, in words, seconds in small print


@pytest.mark.parametrize(
    "query",
    ["from=2026-11-31&to=2026-12-01", "from=yesterday&to=2026-12-01", "from=2026-12-01&to=2026-11-01",
     "from=2026-11-01", "from=%e2%80%ae2026-11-01&to=%ff", "to=2026-12-01"],
)
def test_a_bad_period_is_a_clear_refusal_DSA_6(app, world, client, query):
    """DSA-6: 400 transparency_period_invalid in words on the page, the CSV and as JSON;
    never a 500, no figures."""
    login(client, "auditor@example.com")
    page = client.get(f"/transparency?{query}")
    text = page.get_data(as_text=True)
    assert page.status_code == 400 and 'data-code="transparency_period_invalid"' in text
    assert "figures-table" not in text
    assert client.get(f"/transparency.csv?{query}").status_code == 400
    answer = client.get(f"/transparency?{query}", headers={"Accept": "application/json"})
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "transparency_period_invalid"


def test_the_default_period_is_the_last_full_month_and_roles_are_checked_DSA_6(app, world, client):
    """DSA-6: without a period the page shows the last full calendar month; the
    report is for admins and auditors (the navigation offers it to them only)."""
    from app.domain.clock import utcnow
    from app.domain.transparency import last_full_month

    login(client, "auditor@example.com")
    page = client.get("/transparency").get_data(as_text=True)
    month = last_full_month(utcnow().date())
    assert f'name="from" value="{month.start.isoformat()}"' in page
    assert f'name="to" value="{month.end.isoformat()}"' in page
    assert '<a href="/transparency"' in page
    other = app.test_client()
    login(other, "moderator@example.com")
    assert other.get("/transparency").status_code == 403
    assert other.get("/transparency.csv").status_code == 403
    assert '<a href="/transparency"' not in other.get("/queue").get_data(as_text=True)


def test_bars_are_in_proportion_and_zeros_are_not_drawn_DSA_6():
    """DSA-6: one bar per figure above 0; the largest spans the chart less the room
    for its value, the others in proportion, a tiny one still 2 units wide."""
    from app.domain.transparency import Figure
    from app.web.charts import VALUE_ROOM, WIDTH, bar_chart

    chart = bar_chart("c", "t", [Figure("a", "A", 0), Figure("b", "B", 1000), Figure("c", "C", 500),
                                 Figure("d", "D", 1), Figure("e", "E", None)])
    assert [bar.key for bar in chart.bars] == ["b", "c", "d"]
    assert [bar.width for bar in chart.bars] == [WIDTH - VALUE_ROOM, (WIDTH - VALUE_ROOM) / 2, 2.0]
    assert chart.description == "B: 1000; C: 500; D: 1" and chart.height == 120
    assert bar_chart("e", "t", []).bars == () and bar_chart("e", "t", []).description == "No figures to draw."


def test_the_page_runs_the_same_few_queries_whatever_the_history_DSA_6(app, world, client):
    """DSA-6: statements are counted in SQL by groups and appeals loaded in one query:
    the page runs as many queries for an empty month as for a month with history."""
    from .test_query_counts import counting

    build_history(world)
    login(client, "auditor@example.com")
    client.get(f"/transparency?{QUERY}")  # warm: labels, settings
    with counting(app) as busy:
        assert client.get(f"/transparency?{QUERY}").status_code == 200
    with counting(app) as empty:
        assert client.get("/transparency?from=2025-11-01&to=2025-12-01").status_code == 200
    assert len(busy) == len(empty) <= 12, busy
