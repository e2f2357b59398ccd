"""Scale: 1,000,000 proposals in PostgreSQL (bulk loaded). The first and the 1,000th
page of the proposals list (keyset pagination), the counts by state, and the
due-delivery sweep query with 1,000 due rows, with its EXPLAIN plan."""

from __future__ import annotations

import json
import statistics
import sys
import time

from common import bench_app, save
from sqlalchemy import text

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
DUE = 1000
PAGE = 50
DEEP_PAGE = 1000


def bulk_load(app) -> None:
    """Clone one real proposal ROWS times, with spread-out creation times and states."""
    from sqlalchemy import select

    from app.demo import seed_demo
    from app.extensions import db
    from app.models import ActionProposal, OperatorUser
    from app.services.cases.reports import record_decision

    with app.app_context():
        seed_demo("http://127.0.0.1:9", slug="bench")
        moderator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-moderator@example.com"))
        from app.models import Report

        report_id = db.session.scalar(select(Report.id).order_by(Report.public_reference))
        record_decision(report_id, decision_code="remove_content", rationale="", operator=moderator)
        template = db.session.scalar(select(ActionProposal.id))
        columns = [c.name for c in ActionProposal.__table__.columns]
        varying = {
            "id": "'bulk-' || n",
            "operation_id": "'bulk-op-' || n",
            "state": "(ARRAY['applied','applied','applied','rejected','failed','cancelled','approval_required',"
            "'compensation_required'])[1 + n % 8]",
            "delivery_terminal": "true",
            "next_attempt_at": "NULL",
            "created_at": "now() - (n || ' seconds')::interval",
            "updated_at": "now() - (n || ' seconds')::interval",
        }
        select_list = ", ".join(varying.get(c, c) for c in columns)
        started = time.perf_counter()
        db.session.execute(
            text(
                f"INSERT INTO action_proposals ({', '.join(columns)}) "
                f"SELECT {select_list} FROM action_proposals, generate_series(1, :rows) AS n WHERE id = :template"
            ),
            {"rows": ROWS, "template": template},
        )
        db.session.execute(
            text(
                "UPDATE action_proposals SET state = 'queued', delivery_terminal = false, "
                "next_attempt_at = now() - interval '1 minute' WHERE id IN "
                "(SELECT id FROM action_proposals WHERE id LIKE 'bulk-%' ORDER BY id LIMIT :due)"
            ),
            {"due": DUE},
        )
        db.session.commit()
        db.session.execute(text("ANALYZE action_proposals"))
        db.session.commit()
        print(f"  loaded {ROWS} rows in {time.perf_counter() - started:.1f} s", flush=True)


def timed(fn, repeat: int = 20) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    app = bench_app()
    print(f"bulk loading {ROWS} proposals ...", flush=True)
    bulk_load(app)
    from sqlalchemy import select

    from app.domain.clock import utcnow
    from app.extensions import db
    from app.models import ActionProposal, OperatorUser
    from app.services.lifecycle import sweeps
    from app.services.read import console as readmodels

    with app.app_context():
        operator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "bench-reviewer@example.com"))
        filters = readmodels.ProposalFilters()
        query = readmodels._filtered(operator.installation_id, filters, operator)
        P = ActionProposal
        deep = db.session.execute(
            query.with_only_columns(P.created_at, P.id)
            .order_by(P.created_at.desc(), P.id.desc())
            .offset(PAGE * (DEEP_PAGE - 1) - 1)
            .limit(1)
        ).one()
        cursor = readmodels.encode_cursor(deep.created_at, deep.id)

        def page(after):
            rows = readmodels.list_proposals(operator, filters, after, with_counts=False).rows
            assert len(rows) == PAGE
            db.session.rollback()

        first_ms = timed(lambda: page(None))
        deep_ms = timed(lambda: page(cursor))
        from app.queueing import get_redis

        def cold_counts():
            get_redis(app).delete(f"console:state-counts:{operator.installation_id}")
            readmodels.state_counts(operator.installation_id)
            db.session.rollback()

        counts_ms = timed(cold_counts, repeat=5)
        cached_counts_ms = timed(lambda: readmodels.state_counts(operator.installation_id), repeat=20)
        now = utcnow()
        due = sweeps.due_proposals(now)
        assert len(due) >= 500
        sweep_ms = timed(lambda: sweeps.due_proposals(now), repeat=10)
        compiled = sweeps.due_query(now).compile(db.engine, compile_kwargs={"literal_binds": True})
        plan = [row[0] for row in db.session.execute(text(f"EXPLAIN {compiled}"))]
        db.session.rollback()
    uses_index = any("Index" in line for line in plan) and not any(
        "Seq Scan on action_proposals" in line for line in plan
    )
    figures = {
        "scale_rows": ROWS,
        "first_page_ms": round(first_ms, 2),
        "deep_page_ms": round(deep_ms, 2),
        "deep_page_number": DEEP_PAGE,
        "deep_page_ratio": round(deep_ms / first_ms, 2),
        "state_counts_cold_ms": round(counts_ms, 1),
        "state_counts_cached_ms": round(cached_counts_ms, 2),
        "sweep_due_rows": DUE,
        "sweep_query_ms": round(sweep_ms, 2),
        "sweep_uses_index": uses_index,
        "sweep_plan": plan,
    }
    save("scale", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
