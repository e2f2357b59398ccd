"""Fill the queue fast for the console bench: reports, their targets and their
subjects written by bulk INSERTs in a few transactions (no services, no audit),
as an installation that has received `reports` reports about `subjects` subjects."""

from __future__ import annotations

from datetime import timedelta

CHUNK = 20_000


def seed_queue(installation_id: str, integration_id: str, queue_id: str, reports: int, subjects: int) -> None:
    """`reports` open reports spread evenly over `subjects` open subjects in `queue_id`."""
    from app.domain.clock import utcnow
    from app.extensions import db
    from app.models import Report, ReportSubject, ReportTarget

    subjects = max(1, min(subjects, reports))
    db.session.commit()
    db.session.remove()  # no read transaction of ours holds SQLite's WAL back from checkpoints
    start = utcnow() - timedelta(days=30)
    per_subject = reports // subjects
    subject_rows = []
    for n in range(subjects):
        first = start + timedelta(seconds=n * 20)
        last = first + timedelta(seconds=per_subject)
        subject_rows.append(
            {
                "id": f"sub_bench{n:08d}",
                "installation_id": installation_id,
                "reference": f"post:b{n}",
                "kind": "content",
                "state": "open",
                "open_count": per_subject,
                "report_count": per_subject,
                "waiting_since": first,
                "first_reported_at": first,
                "last_reported_at": last,
                "queue_id": queue_id,
                "categories": "|spam|",
                "reasons": "|spam|",
                "preview": f"Buy cheap watches now, offer {n}",
                "author_reference": f"user:{n % 5000}",
                "author_name": f"seller{n % 5000}",
                "search_text": f"post:b{n} user:{n % 5000} seller{n % 5000} buy cheap watches now",
                "created_at": first,
                "updated_at": last,
            }
        )
    with db.engine.begin() as conn:
        for i in range(0, len(subject_rows), CHUNK):
            conn.execute(ReportSubject.__table__.insert(), subject_rows[i : i + CHUNK])
    for i in range(0, reports, CHUNK * 5):  # one transaction per 100,000 reports
        report_rows, target_rows = [], []
        for r in range(i, min(reports, i + CHUNK * 5)):
            n = r % subjects
            at = start + timedelta(seconds=n * 20 + r // subjects)
            report_rows.append(
                {
                    "id": f"rep_bench{r:09d}",
                    "installation_id": installation_id,
                    "integration_id": integration_id,
                    "queue_id": queue_id,
                    "external_id": f"bench-{r}",
                    "public_reference": f"R-B{r}",
                    "state": "open",
                    "category": "spam",
                    "reason": "spam",
                    "summary": "",
                    "subject_id": f"sub_bench{n:08d}",
                    "created_at": at,
                    "updated_at": at,
                }
            )
            target_rows.append(
                {
                    "id": f"tgt_bench{r:09d}",
                    "installation_id": installation_id,
                    "report_id": f"rep_bench{r:09d}",
                    "target_reference": f"post:b{n}",
                    "kind": "content",
                    "position": 0,
                    "created_at": at,
                }
            )
        with db.engine.begin() as conn:
            for j in range(0, len(report_rows), CHUNK):
                conn.execute(Report.__table__.insert(), report_rows[j : j + CHUNK])
                conn.execute(ReportTarget.__table__.insert(), target_rows[j : j + CHUNK])
    if db.engine.dialect.name == "sqlite":
        with db.engine.begin() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
