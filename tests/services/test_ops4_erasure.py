"""Erasure and retention of personal data, the record still verifying (SPEC OPS-4)."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
import sqlalchemy
from sqlalchemy import String, Text, func, select, text

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.extensions import db
from app.models import (
    Appeal,
    AuditEvent,
    Base,
    ErasureRequest,
    Report,
    ReportEvidence,
    ReportSubject,
    RetentionSetting,
)
from app.services.admin import erasure_requests as erasure
from app.services.cases.appeals import file_appeal
from app.services.cases.erasure import erase_due_retention
from app.services.uow import Actor

from ..builders import add_report_with_evidence, decide, set_row

AUTHOR = "user:77001"
MARKERS = ("Zanzibar-quokka-remark", "quokka_fan_7701", "media.example/quokka-7701", "quokka-permalink-7701",
           "quokka summary 7701", "quokka appeal 7701")
EVIDENCE = {
    "content_text": f"{MARKERS[0]}: you will regret it",
    "author_reference": AUTHOR,
    "author_name": MARKERS[1],
    "media": [{"url": f"https://{MARKERS[2]}.jpg", "sha256": "c" * 64, "mime_type": "image/jpeg"}],
    "permalink": f"https://social.example/{MARKERS[3]}",
}


def reported(world, external_id: str = "quokka-1", reference: str = "post:77001", summary: str = MARKERS[4]) -> str:
    """A report on a post by AUTHOR carrying every kind of personal text, with a summary."""
    from app.services.cases.reports import intake_report

    result = intake_report({"external_id": external_id, "summary": summary,
                            "targets": [{"reference": reference, "kind": "post", "evidence": EVIDENCE}]},
                           world.integration_id)
    world.report_ids.append(result.report_id)
    return result.report_id


def holding(marker: str) -> list[str]:
    """Every table.column whose raw stored text holds `marker` (raw SQL over every text column)."""
    db.session.rollback()
    found = []
    for table in Base.metadata.sorted_tables:
        for column in table.columns:
            if isinstance(column.type, String | Text) or "json" in column.name:
                count = db.session.scalar(text(f'SELECT count(*) FROM "{table.name}" WHERE "{column.name}" LIKE :m'),
                                          {"m": f"%{marker}%"})
                if count:
                    found.append(f"{table.name}.{column.name}")
    return found


def approved_erasure(world, subject: str = AUTHOR):
    request = erasure.request_erasure(world.user("admin"), subject, "Data subject request, ticket DSR-4411")
    return erasure.approve(world.user("admin2"), request.id)


def digests() -> dict[str, str]:
    db.session.rollback()
    return dict(db.session.execute(select(ReportEvidence.id, ReportEvidence.evidence_digest)).all())


def test_ops4_erasure_needs_a_second_admin(app, world):
    """OPS-4: the admin who asked cannot approve nor reject; a moderator cannot ask; nothing changes."""
    reported(world)
    request = erasure.request_erasure(world.user("admin"), AUTHOR, "Data subject request, ticket DSR-4411")
    for decide_with in (erasure.approve, erasure.reject):
        with pytest.raises(ApiError) as refused:
            decide_with(world.user("admin"), request.id)
        assert (refused.value.status, refused.value.code) == (403, "erasure_same_admin")
    with pytest.raises(ApiError) as refused:
        erasure.request_erasure(world.user("moderator"), AUTHOR, "Data subject request, ticket DSR-4411")
    assert refused.value.code == "forbidden"
    db.session.rollback()
    assert db.session.get(ErasureRequest, request.id).state == "pending"
    assert "report_evidence.content_text" in holding(MARKERS[0])
    erasure.approve(world.user("admin2"), request.id)
    assert holding(MARKERS[0]) == []
    with pytest.raises(ApiError) as refused:
        erasure.approve(world.user("admin2"), request.id)
    assert (refused.value.status, refused.value.code) == (409, "erasure_not_pending")


@pytest.mark.parametrize(("subject", "reason", "code"), [
    ("", "Data subject request, ticket DSR-4411", "erasure_subject_invalid"),
    ("user 1", "Data subject request, ticket DSR-4411", "erasure_subject_invalid"),
    (AUTHOR, "", "erasure_reason_invalid"),
    (AUTHOR, "asked", "erasure_reason_invalid"),
    (AUTHOR, "\u200b" * 20 + " x", "erasure_reason_invalid"),
])
def test_ops4_a_request_without_subject_or_reason_is_refused(app, world, subject, reason, code):
    with pytest.raises(ApiError) as refused:
        erasure.request_erasure(world.user("admin"), subject, reason)
    assert (refused.value.status, refused.value.code) == (400, code)
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(ErasureRequest)) == 0


def test_ops4_a_rejected_request_changes_nothing(app, world):
    report_id = reported(world)
    request = erasure.request_erasure(world.user("admin"), AUTHOR, "Data subject request, ticket DSR-4411")
    erasure.reject(world.user("admin2"), request.id)
    db.session.rollback()
    assert db.session.get(ErasureRequest, request.id).state == "rejected"
    assert db.session.get(Report, report_id).erased_at is None
    assert "report_evidence.content_text" in holding(MARKERS[0])
    with pytest.raises(ApiError) as refused:
        erasure.approve(world.user("admin2"), request.id)
    assert refused.value.code == "erasure_not_pending"


def test_ops4_erasure_removes_the_text_from_every_column_of_every_table(app, world):
    """OPS-4: after approval no column of any table holds any of the subject's personal
    text (raw SQL over every text column), the digests are those of intake, the rows say
    when and why, and the audit row has counts, not the text."""
    report_id = reported(world)
    decide(world, report_id)
    file_appeal(report_id, statement=MARKERS[5], actor=Actor("operator", world.users["moderator"]),
                installation_id=world.installation_id)
    other = add_report_with_evidence(world, "unrelated-1", "post:5", content_text="an unrelated quokka-free post",
                                     author_reference="user:5", author_name="someone_else")
    before = digests()
    assert all(holding(marker) for marker in MARKERS)
    approved = approved_erasure(world)
    for marker in MARKERS:
        assert holding(marker) == [], marker
    assert digests() == before
    row = db.session.scalar(select(ReportEvidence).where(ReportEvidence.report_id == report_id))
    assert (row.content_text, row.author_name, row.media, row.permalink) == (None, None, [], None)
    assert (row.author_reference, row.target_reference, row.erased_reason) == (AUTHOR, "post:77001", "request")
    report = db.session.get(Report, report_id)
    assert (report.summary, report.erased_reason) == ("", "request") and report.erased_at is not None
    assert db.session.scalar(select(Appeal.erased_reason).where(Appeal.report_id == report_id)) == "request"
    subject = db.session.get(ReportSubject, report.subject_id)
    assert (subject.preview, subject.author_name, subject.erased_reason) == ("", None, "request")
    assert approved.counts == {"evidence": 1, "reports": 1, "appeals": 1, "subjects": 1}
    [audit] = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "erasure.approved")).all()
    assert audit.details["counts"] == approved.counts and audit.details["subject_reference"] == AUTHOR
    assert set(holding("someone_else")) == {"report_evidence.author_name", "report_subjects.author_name",
                                            "report_subjects.search_text"}
    assert db.session.scalar(select(ReportEvidence.content_text).where(ReportEvidence.report_id == other)) \
        == "an unrelated quokka-free post"


def test_ops4_the_audit_chain_and_checkpoints_verify_after_erasure(app, world, runner):
    """OPS-4: `flask verify-audit` is clean after an erasure, against a checkpoint taken
    before it and one taken after (the chain never held the erased text)."""
    reported(world)
    assert runner.invoke(args=["audit-checkpoint"]).exit_code == 0
    approved_erasure(world)
    result = runner.invoke(args=["verify-audit"])
    assert result.exit_code == 0 and "demo: ok (" in result.output and "1 checkpoints agree" in result.output, \
        result.output
    assert runner.invoke(args=["audit-checkpoint"]).exit_code == 0
    result = runner.invoke(args=["verify-audit"])
    assert result.exit_code == 0 and "2 checkpoints agree" in result.output, result.output


def raw_update(statement: str, **params) -> None:
    db.session.rollback()
    try:
        with pytest.raises(sqlalchemy.exc.DBAPIError):
            db.session.execute(text(statement), params)
            db.session.flush()
    finally:
        db.session.rollback()


def test_ops4_the_database_refuses_every_other_update_of_evidence(app, world):
    """OPS-4, REV-1: the trigger allows only the erasure move, once; both backends."""
    report_id = reported(world)
    now = utcnow().isoformat()
    where = "WHERE report_id = :r"
    erase = "content_text = NULL, author_name = NULL, permalink = NULL, media_json = '[]', erased_at = :t"
    raw_update(f"UPDATE report_evidence SET content_text = 'rewritten' {where}", r=report_id)
    raw_update(f"UPDATE report_evidence SET erased_at = :t, erased_reason = 'request' {where}", r=report_id, t=now)
    raw_update(f"UPDATE report_evidence SET {erase}, erased_reason = 'request', evidence_digest = 'sha256:x' {where}",
               r=report_id, t=now)
    raw_update(f"UPDATE report_evidence SET {erase}, erased_reason = 'whim' {where}", r=report_id, t=now)
    assert "report_evidence.content_text" in holding(MARKERS[0])
    approved_erasure(world)
    raw_update(f"UPDATE report_evidence SET erased_at = :t {where}", r=report_id, t=now)
    raw_update(f"UPDATE report_evidence SET content_text = 'back again' {where}", r=report_id)
    raw_update(f"UPDATE report_evidence SET erased_reason = 'retention' {where}", r=report_id)


def past(report_id: str, days: int) -> None:
    set_row(Report, report_id, updated_at=utcnow() - timedelta(days=days))


def set_retention(world, days: str) -> ErasureRequest:
    request = erasure.request_retention(world.user("admin"), days, "Retention policy v3, approved by the DPO")
    return erasure.approve(world.user("admin2"), request.id)


def test_ops4_retention_is_four_eyes_and_checked(app, world):
    with pytest.raises(ApiError) as refused:
        erasure.request_retention(world.user("admin"), "0", "Retention policy v3, approved by the DPO")
    assert refused.value.code == "retention_days_invalid"
    with pytest.raises(ApiError) as refused:
        erasure.request_retention(world.user("admin"), "", "Retention policy v3, approved by the DPO")
    assert refused.value.code == "retention_unchanged"
    request = erasure.request_retention(world.user("admin"), "30", "Retention policy v3, approved by the DPO")
    with pytest.raises(ApiError) as refused:
        erasure.approve(world.user("admin"), request.id)
    assert refused.value.code == "erasure_same_admin"
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(RetentionSetting)) == 0
    erasure.approve(world.user("admin2"), request.id)
    db.session.rollback()
    assert db.session.scalar(select(RetentionSetting.closed_case_days)) == 30


def test_ops4_the_retention_sweep_erases_only_what_is_due_and_is_idempotent(app, world, runner):
    """OPS-4: closed cases past the period are erased "by retention"; recent and open
    ones are not; `flask erasure-sweep` (docs/erasure.md) run again erases nothing."""
    due, recent, still_open = (reported(world, name, reference=f"post:{name}") for name in ("due", "recent", "open"))
    decide(world, due)
    decide(world, recent)
    past(due, 40)
    past(still_open, 400)
    set_retention(world, "30")
    result = runner.invoke(args=["erasure-sweep"])
    assert result.exit_code == 0 and result.output.strip() == "erased 3 rows past their retention period", \
        result.output
    db.session.rollback()
    erased = {report_id: db.session.get(Report, report_id).erased_reason for report_id in (due, recent, still_open)}
    assert erased == {due: "retention", recent: None, still_open: None}
    assert db.session.scalar(select(ReportEvidence.content_text).where(ReportEvidence.report_id == recent))
    [audit] = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "erasure.retention")).all()
    assert audit.details["counts"] == {"evidence": 1, "reports": 1, "appeals": 0, "subjects": 1}
    result = runner.invoke(args=["erasure-sweep"])
    assert result.output.strip() == "erased 0 rows past their retention period"
    assert runner.invoke(args=["verify-audit"]).exit_code == 0


def test_ops4_two_retention_sweeps_at_once_erase_each_row_once(app, world):
    """OPS-4: guarded writes: two sweeps at the same time count every row once."""
    ids = [reported(world, f"r-{n}", reference=f"post:{n}") for n in range(4)]
    for report_id in ids:
        decide(world, report_id)
        past(report_id, 40)
    set_retention(world, "30")
    totals, barrier = [], threading.Barrier(2)

    def sweep():
        with app.app_context():
            barrier.wait()
            totals.append(erase_due_retention())
            db.session.remove()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    db.session.rollback()
    assert sum(totals) == 4 * 3  # evidence, report and queue row of each
    assert db.session.scalar(select(func.count()).select_from(Report).where(Report.erased_reason == "retention")) == 4
    audited = db.session.scalars(select(AuditEvent).where(AuditEvent.action == "erasure.retention")).all()
    assert sum(sum(a.details["counts"].values()) for a in audited) == 12


def test_ops4_the_periodic_sweep_runs_the_retention_sweep(app, world, runner):
    report_id = reported(world)
    decide(world, report_id)
    past(report_id, 40)
    set_retention(world, "30")
    result = runner.invoke(args=["sweep"])
    assert result.exit_code == 0 and "'retention_rows_erased': 3" in result.output, result.output


def test_ops4_every_command_in_docs_erasure_runs(app, world, runner):
    """docs/erasure.md: each ```bash command is read from the doc and run here (through
    Flask's CLI runner, as `flask --app app …`), after an erasure and a retention sweep's
    due case: each exits 0 and says what the doc says."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "erasure.md").read_text()
    commands = [line.split()[3:] for block in re.findall(r"```bash\n(.*?)```", doc, re.S)
                for line in block.splitlines() if line.startswith("flask --app app ")]
    assert commands == [["erasure-sweep"], ["verify-audit"]]
    due = reported(world, "doc-due")
    decide(world, due)
    past(due, 40)
    set_retention(world, "30")
    approved_erasure(world, "post:nobody")
    outputs = {}
    for args in commands:
        result = runner.invoke(args=args)
        assert result.exit_code == 0, (args, result.output)
        outputs[args[0]] = result.output
    assert outputs["erasure-sweep"].strip() == "erased 3 rows past their retention period"
    assert "demo: ok (" in outputs["verify-audit"]
