"""Prometheus metrics (prometheus-client).

Counters and histograms are written by whichever process does the work (web or
worker). Under gunicorn and for workers on the same host, set
PROMETHEUS_MULTIPROC_DIR (gunicorn.conf.py does) so every process writes to one
directory that `/metrics` aggregates. Gauges about the database (proposals by
state, approvals waiting, sweep lag, budget usage) are read at scrape time.
"""

from __future__ import annotations

import os
from datetime import datetime

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

DELIVERIES = Counter(
    "console_deliveries_total",
    "Delivery attempts by outcome (applied, accepted, retry, failed, deferred) and error code.",
    ["outcome", "error_code"],
)
ATTEMPT_SECONDS = Histogram(
    "console_delivery_attempt_seconds",
    "Duration of one HTTP attempt to a platform, in seconds.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
SWEEPS = Counter("console_sweeps_total", "Sweeps run, by result.", ["result"])
CONNECTION_WAITS = Counter(
    "console_connection_waits_total",
    "Deliveries a connection held back (CONN-1..3): circuit open, probe in flight, 429 pause, disabled, "
    "rate limited (deferred) or rate_limit_sleep (slept for its slot).",
    ["connection_id", "reason"],
)
CONNECTION_TRANSITIONS = Counter(
    "console_connection_transitions_total",
    "Connection health transitions (opened, probe_started, closed, reopened, paused, disabled, re_enabled).",
    ["connection_id", "transition"],
)


def record_connection_wait(connection_id: str, reason: str) -> None:
    CONNECTION_WAITS.labels(connection_id=connection_id, reason=reason).inc()


def record_connection_transition(connection_id: str, transition: str) -> None:
    CONNECTION_TRANSITIONS.labels(connection_id=connection_id, transition=transition).inc()


def record_delivery(outcome: str, error_code: str | None, seconds: float | None) -> None:
    DELIVERIES.labels(outcome=outcome, error_code=error_code or "").inc()
    if seconds is not None:
        ATTEMPT_SECONDS.observe(seconds)


class DatabaseCollector:
    """Gauges computed from the database when Prometheus scrapes."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def collect(self):
        from sqlalchemy import func, select

        from app.domain.case_states import OPEN_TASK_STATES
        from app.extensions import db
        from app.models import ActionProposal, Budget, HumanTask, SweepRun

        states = GaugeMetricFamily("console_proposals", "Action proposals by state.", labels=["state"])
        for state, count in db.session.execute(
            select(ActionProposal.state, func.count()).group_by(ActionProposal.state)
        ).all():
            states.add_metric([state], count)
        yield states
        waiting, oldest = db.session.execute(
            select(func.count(), func.min(HumanTask.created_at)).where(
                HumanTask.task_type == "approval", HumanTask.state.in_(OPEN_TASK_STATES)
            )
        ).one()
        yield GaugeMetricFamily("console_approvals_waiting", "Approval tasks open or claimed.", value=waiting)
        age = (self.now - _aware(oldest)).total_seconds() if oldest else 0
        yield GaugeMetricFamily("console_approval_oldest_age_seconds", "Age of the oldest waiting approval.", value=age)
        last = db.session.scalar(select(func.max(SweepRun.started_at)))
        lag = (self.now - _aware(last)).total_seconds() if last else -1
        yield GaugeMetricFamily(
            "console_sweep_lag_seconds", "Seconds since the last sweep started (-1: never).", value=lag
        )
        yield _dead_letters()
        usage = GaugeMetricFamily(
            "console_budget_used_ratio", "Used share of each budget's window.", labels=["budget_id", "scope_type"]
        )
        for budget in db.session.scalars(select(Budget).where(Budget.active.is_(True))):
            usage.add_metric([budget.id, budget.scope_type], budget.used_amount / max(budget.limit_amount, 1))
        yield usage
        from app.services.read.temporary_actions import overdue_reversal_count

        yield GaugeMetricFamily(
            "console_reversals_overdue",
            "Reversals of temporary actions still unsent five minutes past their time (TEMP-2).",
            value=overdue_reversal_count(self.now),
        )
        from app.services.read.emergency_reviews import overdue_count

        yield GaugeMetricFamily(
            "console_emergency_reviews_overdue",
            "Retrospective reviews of emergency actions still open past their due time (POL-6).",
            value=overdue_count(self.now),
        )
        yield from _connection_gauges(db.session)
        yield from _bulk_gauges(db.session)
        db.session.rollback()


def _connection_gauges(session):
    """Breaker state (0 closed, 1 half-open, 2 open) and disabled endpoints (CONN-1, CONN-3)."""
    from sqlalchemy import select

    from app.domain.connection_health import CLOSED, gauge_value
    from app.models import Connection, ConnectionHealth

    breaker = GaugeMetricFamily(
        "console_connection_breaker_state",
        "Circuit breaker of each connection: 0 closed, 1 half-open, 2 open.",
        labels=["connection_id", "connection"],
    )
    disabled = GaugeMetricFamily(
        "console_connection_disabled",
        "1 when the connection's endpoint is disabled.",
        labels=["connection_id", "connection"],
    )
    rows = session.execute(
        select(Connection.id, Connection.slug, ConnectionHealth.state, ConnectionHealth.disabled_at).outerjoin(
            ConnectionHealth, ConnectionHealth.connection_id == Connection.id
        )
    ).all()
    from app.domain.connection_health import Health

    for connection_id, slug, state, disabled_at in rows:
        breaker.add_metric([connection_id, slug], gauge_value(Health(state=state or CLOSED)))
        disabled.add_metric([connection_id, slug], 1 if disabled_at else 0)
    yield breaker
    yield disabled
    yield GaugeMetricFamily(
        "console_connections_disabled", "Connections whose endpoint is disabled.", value=sum(1 for r in rows if r[3])
    )


def _bulk_gauges(session):
    """Bulk batches by state, those in progress (running or paused), and the items of
    unfinished batches (submitted, running, paused) by ledger bucket (BULK-6, BULK-9):
    two grouped queries, every installation."""
    from sqlalchemy import func, select

    from app.domain.bulk.batch import LEDGER, ledger_of
    from app.domain.case_states import BatchState
    from app.models import BulkBatch, BulkItem
    from app.services.bulk.progress import ledger_rows

    batches = GaugeMetricFamily("console_bulk_batches", "Bulk batches by state (BULK-7).", labels=["state"])
    by_state = dict(session.execute(select(BulkBatch.state, func.count()).group_by(BulkBatch.state)).all())
    for state in BatchState:
        batches.add_metric([state.value], by_state.get(state.value, 0))
    yield batches
    yield GaugeMetricFamily(
        "console_bulk_batches_in_progress",
        "Bulk batches running or paused.",
        value=by_state.get(BatchState.RUNNING.value, 0) + by_state.get(BatchState.PAUSED.value, 0),
    )
    unfinished = [BatchState.SUBMITTED.value, BatchState.RUNNING.value, BatchState.PAUSED.value]
    rows = session.execute(
        ledger_rows(BulkItem.batch_id.in_(select(BulkBatch.id).where(BulkBatch.state.in_(unfinished))))
    ).all()
    book = ledger_of(rows, 0)
    items = GaugeMetricFamily(
        "console_bulk_items",
        "Items of unfinished bulk batches by ledger bucket (not_started, in_flight, applied, failed, skipped, "
        "cancelled; BULK-6).",
        labels=["bucket"],
    )
    for name in LEDGER:
        items.add_metric([name.value], book[name])
    yield items


def _dead_letters() -> GaugeMetricFamily:
    """Terminal delivery failures by connection (CONN-4): one query, every installation."""
    from sqlalchemy import func, select

    from app.extensions import db
    from app.models import ActionProposal as P
    from app.models import ComponentVersion, Connection, ConnectionVersion, predicates

    gauge = GaugeMetricFamily(
        "console_dead_letters",
        "Deliveries that failed for good (dead letters), by connection ('none': no connection).",
        labels=["connection_id", "connection"],
    )
    rows = db.session.execute(
        select(Connection.id, Connection.name, func.count())
        .select_from(P)
        .outerjoin(ComponentVersion, ComponentVersion.id == P.component_version_id)
        .outerjoin(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .outerjoin(Connection, Connection.id == ConnectionVersion.connection_id)
        .where(predicates.dead_letter())
        .group_by(Connection.id, Connection.name)
    )
    for connection_id, name, count in rows:
        gauge.add_metric([connection_id or "none", name or ""], count)
    return gauge


def _aware(value: datetime) -> datetime:
    from datetime import UTC

    return value if value.tzinfo else value.replace(tzinfo=UTC)


def exposition(now: datetime) -> tuple[bytes, str]:
    """The text exposition of every metric: process metrics (aggregated across
    processes when PROMETHEUS_MULTIPROC_DIR is set) followed by the database gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)
    else:
        from prometheus_client import REGISTRY as processes
    database = CollectorRegistry()
    database.register(DatabaseCollector(now))
    return generate_latest(processes) + generate_latest(database), CONTENT_TYPE_LATEST
