"""Break-it pass on issue 28 through the console (DSA-6, DSA-1, DSA-3): the
transparency figures under another installation's rows and bad period input, and one
admin alone trying to change what statements say or where they go."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from app.domain.transparency import parse_period
from app.extensions import db
from app.models import Appeal, AppealDecision, DsaStatement, Installation, new_id
from app.services.read.transparency_report import transparency_report
from tests.builders import login
from tests.transparency_history import NOVEMBER, build_history


def _copy_into(installation_id: str) -> None:
    """Every statement, appeal and appeal decision of the database copied into
    `installation_id` (new ids, same values)."""
    for model, prefix in ((DsaStatement, "sor"), (Appeal, "apl")):
        table = model.__table__
        rows = [dict(r) for r in db.session.execute(select(table)).mappings()]
        ids = {}
        for row in rows:
            ids[row["id"]] = row["id"] = new_id(prefix)
            row["installation_id"] = installation_id
            if model is DsaStatement:
                row["puid"] = row["puid"] + "-other"
        db.session.execute(insert(table), rows)
        if model is Appeal:
            table = AppealDecision.__table__
            decisions = [dict(r) for r in db.session.execute(select(table)).mappings()]
            for row in decisions:
                row.update(id=new_id("apd"), installation_id=installation_id, appeal_id=ids[row["appeal_id"]])
            db.session.execute(insert(table), decisions)
    db.session.commit()


def test_dsa6_another_installations_rows_do_not_skew_the_figures(app, world, client):
    """DSA-6 attack: another installation holds a copy of every statement, appeal and
    appeal decision of this one, in the same period. This installation's report, page
    and CSV are unchanged; the other's counts are its own."""
    build_history(world)
    period = parse_period(*NOVEMBER)
    before = transparency_report(db.session, world.installation_id, period).rows()
    other = Installation(name="Other team", slug="other-team")
    db.session.add(other)
    db.session.commit()
    _copy_into(other.id)
    assert transparency_report(db.session, world.installation_id, period).rows() == before
    assert transparency_report(db.session, other.id, period).rows() == before
    login(client, "auditor@example.com")
    csv_text = client.get(f"/transparency.csv?from={NOVEMBER[0]}&to={NOVEMBER[1]}").get_data(as_text=True)
    assert "statements,total,Restrictions applied,8" in csv_text.replace("\r", "")


@pytest.mark.parametrize(
    "query",
    [
        "from=9999-12-30&to=9999-12-31",
        "from=0001-01-01&to=0001-01-02",
        "from=2026-11-01&to=2026-11-01",
        "from=%EF%BC%92026-11-01&to=2026-12-01",
        "from=2026-W44-1&to=2026-12-01",
        "from=20261101&to=20261201",
        "from=2026-11-01%00&to=2026-12-01",
        "from=2026-02-29&to=2026-03-01",
        "from=2000-01-01&to=9999-12-31",
        "from=" + "9" * 5000 + "&to=2026-12-01",
    ],
    ids=["last-days", "year-1", "empty", "fullwidth-digit", "iso-week", "compact", "nul", "not-a-day", "huge",
         "long"],
)
def test_dsa6_odd_periods_are_answered_not_500(app, world, client, query):
    """DSA-6 attack: periods at the calendar's edges, in other ISO spellings, with a
    NUL or 5,000 characters. Each is a page (200) or a refusal in words (400
    ``transparency_period_invalid``), never a 500, on the page and the CSV."""
    login(client, "admin@example.com")
    for path in ("/transparency", "/transparency.csv"):
        answer = client.get(f"{path}?{query}")
        assert answer.status_code in (200, 400), (path, answer.status_code)
        if answer.status_code == 400 and path == "/transparency":
            text = answer.get_data(as_text=True)  # the period's code, or the NUL guard's
            assert 'data-code="transparency_period_invalid"' in text or "invalid_characters" in text
