"""Reads of a case as the rules need it: the report snapshot and the run context."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from app.domain.clock import iso
from app.domain.errors import ActionError
from app.domain.preconditions import ReportSnapshot
from app.models import Appeal, Decision, Report, ReportTarget, WorkflowRun, statements


def latest_decision(session: Session, report_id: str) -> Decision | None:
    """The report's most recent decision (ties broken by its sequence number)."""
    return session.scalar(
        select(Decision)
        .where(Decision.report_id == report_id)
        .order_by(Decision.created_at.desc(), Decision.seq.desc())
        .limit(1)
    )


def first_target(session: Session, report_id: str) -> ReportTarget | None:
    return session.scalar(
        select(ReportTarget)
        .where(ReportTarget.report_id == report_id)
        .order_by(ReportTarget.position, ReportTarget.created_at, ReportTarget.id)
        .limit(1)
    )


def _snapshot_statement(many: bool = False):
    latest = (
        select(Decision.id, Decision.decision_code)
        .where(Decision.report_id == Report.id)
        .order_by(Decision.created_at.desc(), Decision.seq.desc())
        .limit(1)
        .correlate(Report)
    )
    first = (
        select(ReportTarget.target_reference)
        .where(ReportTarget.report_id == Report.id)
        .order_by(ReportTarget.position, ReportTarget.created_at, ReportTarget.id)
        .limit(1)
        .correlate(Report)
    )
    columns = (
        Report.state,
        Report.queue_id,
        latest.with_only_columns(Decision.id).scalar_subquery(),
        latest.with_only_columns(Decision.decision_code).scalar_subquery(),
        first.scalar_subquery(),
    )
    if many:
        return select(Report.id, *columns).where(Report.id.in_(bindparam("report_ids", expanding=True)))
    return select(*columns).where(Report.id == bindparam("report_id"))


def report_snapshot(session: Session, report_id: str) -> ReportSnapshot:
    """The report now, as preconditions compare it (PRE-1): one round trip, as this
    runs before every delivery attempt (the statement is built once).

    Raises:
        ActionError: ``action_report_missing``.
    """
    statement = statements.prebuilt(("report-snapshot",), _snapshot_statement)
    row = session.execute(statement, {"report_id": report_id}).one_or_none()
    if row is None:
        raise ActionError("action_report_missing")
    return ReportSnapshot(*row)


def report_snapshots(session: Session, report_ids: list[str]) -> dict[str, ReportSnapshot]:
    """`report_snapshot` of several reports in one round trip (a batch claim's),
    by report id; a missing report is left out."""
    if not report_ids:
        return {}
    statement = statements.prebuilt(("report-snapshots",), lambda: _snapshot_statement(many=True))
    rows = session.execute(statement, {"report_ids": sorted(set(report_ids))})
    return {row[0]: ReportSnapshot(*row[1:]) for row in rows}


def report_json(report: Report) -> dict[str, Any]:
    return {
        "id": report.id,
        "public_reference": report.public_reference,
        "external_id": report.external_id,
        "integration_id": report.integration_id,
        "queue_id": report.queue_id,
        "state": report.state,
        "policy_version_id": report.policy_version_id,
        "category": report.category,
    }


def decision_json(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {
        "id": decision.id,
        "decision_code": decision.decision_code,
        "maker_id": decision.maker_id,
        "created_at": iso(decision.created_at),
    }


def run_context(session: Session, run: WorkflowRun) -> dict[str, Any]:
    """The JSON context a node's input mapping reads: report, targets, decision,
    appeal, run (PREP-4)."""
    report = session.get(Report, run.report_id)
    targets = session.scalars(
        select(ReportTarget)
        .where(ReportTarget.report_id == run.report_id)
        .order_by(ReportTarget.position, ReportTarget.created_at, ReportTarget.id)
    ).all()
    appeal = session.get(Appeal, run.appeal_id) if run.appeal_id else None
    return {
        "report": report_json(report),
        "targets": [{"target_reference": t.target_reference, "kind": t.kind} for t in targets],
        "decision": decision_json(latest_decision(session, run.report_id)),
        "appeal": {"id": appeal.id, "decision_id": appeal.decision_id, "state": appeal.state} if appeal else None,
        "run": {
            "id": run.id,
            "workflow_version_id": run.workflow_version_id,
            "decision_id": run.decision_id,
            "created_at": iso(run.created_at),
        },
    }
