"""The transparency report page and its CSV (SPEC §7 DSA-6): admins and auditors read
the figures of a period of whole UTC days; views parse the period, call the read
service, render."""

from __future__ import annotations

import csv
import io

from flask import Response, render_template, request
from flask_login import current_user

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.transparency import Period, last_full_month, parse_period
from app.extensions import db
from app.services.dsa.settings import current_settings
from app.services.read.transparency_report import transparency_report

from ..charts import bar_chart
from ..decorators import role_required
from ..errors import raise_for_json
from .blueprint import bp

REPORT_ROLES = ("admin", "auditor")


def _period() -> Period:
    """The period the query string asks for; none given: the last full calendar month.

    Raises:
        ApiError: 400 ``transparency_period_invalid`` (`parse_period`).
    """
    if not request.args.get("from") and not request.args.get("to"):
        return last_full_month(utcnow().date())
    return parse_period(request.args.get("from"), request.args.get("to"))


def duration_words(seconds: int | None) -> str:
    """Seconds in words for people: ``3h 05m``, ``4m 10s``, ``12s``; None: "no data"."""
    if seconds is None:
        return "no data"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


@bp.get("/transparency")
@role_required(*REPORT_ROLES)
def transparency():
    """The figures of a period as tables and bar charts (DSA-6); a bad period is
    refused in words (400) with the form, and no figures."""
    try:
        period = _period()
    except ApiError as error:
        raise_for_json(error)
        return render_template(
            "transparency/report.html", error=error, report=None, charts={}, asked=request.args, dsa_on=None
        ), 400
    report = transparency_report(db.session, current_user.installation_id, period)
    charts = {
        s.key: bar_chart(f"chart-{s.key}", f"{s.title}: restrictions applied", s.figures)
        for s in report.sections
        if s.chart
    }
    outcomes = report.section("appeals")
    charts["appeals"] = bar_chart(
        "chart-appeals", "Appeals decided, by outcome", [f for f in outcomes.figures if f.key.startswith("decided_")]
    )
    return render_template(
        "transparency/report.html",
        error=None,
        report=report,
        charts=charts,
        asked={"from": period.start.isoformat(), "to": period.end.isoformat()},
        dsa_on=current_settings(db.session, current_user.installation_id).enabled,
        duration_words=duration_words,
    )


@bp.get("/transparency.csv")
@role_required(*REPORT_ROLES)
def transparency_csv():
    """The same figures as CSV, one line per figure: section, key, label, value
    (seconds for times; empty: no data), as an attachment (DSA-6).

    Raises:
        ApiError: 400 ``transparency_period_invalid`` (answered as a page, or JSON).
    """
    period = _period()
    report = transparency_report(db.session, current_user.installation_id, period)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["section", "key", "label", "value"])
    for section, key, label, value in report.rows():
        writer.writerow([section, key, label, "" if value is None else value])
    name = f"transparency-{period.start.isoformat()}-to-{period.last_day.isoformat()}.csv"
    return Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
