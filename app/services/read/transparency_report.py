"""The transparency report's figures from the console's own records (SPEC §7 DSA-6).

Statements are counted in SQL (one GROUP BY over the period's statements of
reasons); the report-to-action durations and the appeals are loaded as plain
values and measured in Python, so the percentiles are the domain's
(`app.domain.transparency`, nearest rank) on every backend. Read-only: no write, no
commit. (Named apart from the domain module, which `tests/test_layout.py` asks for.)
"""

from __future__ import annotations

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.domain.transparency import (
    AppealRow,
    Period,
    StatementGroup,
    StatementRow,
    TransparencyReport,
    assemble,
    seconds_between,
    statement_counts,
)
from app.models import Appeal, AppealDecision, DsaStatement

S = DsaStatement
COUNTED = (S.category, S.ground, S.restriction, S.restriction_type, S.automated_decision, S.automated_detection)


def _in_period(period: Period):
    return (S.applied_at >= period.starts_at, S.applied_at < period.ends_at)


def statement_groups(session: Session, installation_id: str, period: Period) -> list[StatementGroup]:
    """The period's statements grouped by every counted value, with their count (SQL)."""
    rows = session.execute(
        select(*COUNTED, func.count())
        .where(S.installation_id == installation_id, *_in_period(period))
        .group_by(*COUNTED)
    )
    return [StatementGroup(*values[:-1], count=values[-1]) for values in rows]


def report_durations(session: Session, installation_id: str, period: Period) -> list[int]:
    """Seconds from report received to restriction applied, for the period's
    statements that followed a report."""
    rows = session.execute(
        select(S.reported_at, S.applied_at).where(
            S.installation_id == installation_id, S.reported_at.is_not(None), *_in_period(period)
        )
    )
    return [seconds_between(reported, applied) for reported, applied in rows]


def appeal_rows(session: Session, installation_id: str, period: Period) -> list[AppealRow]:
    """Appeals filed in the period or decided in it, each with its one decision."""
    decided_at, starts, ends = AppealDecision.created_at, period.starts_at, period.ends_at
    rows = session.execute(
        select(Appeal.created_at, decided_at, AppealDecision.outcome)
        .outerjoin(AppealDecision, AppealDecision.appeal_id == Appeal.id)
        .where(
            Appeal.installation_id == installation_id,
            or_(
                (Appeal.created_at >= starts) & (Appeal.created_at < ends),
                (decided_at >= starts) & (decided_at < ends),
            ),
        )
    )
    return [AppealRow(created, decided, outcome) for created, decided, outcome in rows]


def transparency_report(session: Session, installation_id: str, period: Period) -> TransparencyReport:
    """The installation's transparency report for `period` (DSA-6).

    Args:
        session: a database session (only read).
        installation_id: whose records.
        period: whole UTC days ``[start, end)``.

    Returns:
        The `TransparencyReport`: statement counts by category, ground, restriction
        (and type), automated decision and detection; report-to-action median and
        90th percentile (seconds); appeals received, decided, median time to decide,
        by outcome and reversed; suspensions. Three queries.
    """
    counts = statement_counts(statement_groups(session, installation_id, period))
    durations = report_durations(session, installation_id, period)
    return assemble(period, counts, durations, appeal_rows(session, installation_id, period))


def statement_rows(session: Session, installation_id: str, period: Period) -> list[StatementRow]:
    """The period's statements one by one, as plain rows (what the domain counts
    when it is given rows: the tests hold SQL's counts equal to the domain's)."""
    rows = session.execute(
        select(*COUNTED, S.applied_at, S.reported_at).where(S.installation_id == installation_id, *_in_period(period))
    )
    return [StatementRow(*values) for values in rows]
