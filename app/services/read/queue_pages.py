"""The moderator's queue as a page: one row per subject, filtered, searched and
paged by keyset (SPEC QUEUE-1, QUEUE-2, QUEUE-4). Reads `report_subjects` only
(plus the queue and the claim holder), so a page costs the same at a million reports.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import aliased

from app.domain.bulk.subjects import canonical_reference
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.queue import (
    PAGE_SIZE,
    Assignment,
    QueueFilter,
    QueueSort,
    age_seconds,
    claim_active,
    decode_cursor,
    due_at,
    encode_cursor,
    is_overdue,
    sort_key,
    words,
)
from app.extensions import db
from app.models import OperatorUser, Queue, Report, ReportSubject, claim_active_sql, overdue_sql
from app.services.read.protection import protected_marks

S = ReportSubject
HOLDER = aliased(OperatorUser)  # built once: aliases are pure and costly to build per request
OVERDUE_COUNT_LIMIT = 1000  # counted up to here, then shown as "1,000+"


@dataclass(frozen=True)
class QueueRow:
    id: str
    reference: str
    kind: str
    state: str
    open_count: int
    report_count: int
    categories: list[str]
    reasons: list[str]
    preview: str
    author_reference: str | None
    author_name: str | None
    first_reported_at: datetime
    last_reported_at: datetime
    waiting_since: datetime
    age_seconds: int
    queue_name: str | None
    due_at: datetime | None  # when it is (or became) overdue; None without a target (QUEUE-4)
    overdue: bool
    claimed_by: str | None  # the holder's display name while the claim holds (QUEUE-2)
    claimed_until: datetime | None
    claimed_by_me: bool
    erased_at: datetime | None = None  # OPS-4: its reports' personal data erased
    erased_reason: str | None = None
    mark: Any = None  # POL-4: the subject's protected mark (`ProtectionMark`), if protected
    author_mark: Any = None  # POL-4: its author's, if protected


def with_marks(rows: list[QueueRow], installation_id: str) -> list[QueueRow]:
    """The rows with their subjects' and authors' protected marks (POL-4): one query
    for the whole page, none for an empty one. Content by an author marked ``author``
    carries that mark as its own."""
    marks = protected_marks(db.session, installation_id,
                            [r.reference for r in rows] + [r.author_reference for r in rows])
    if not marks:
        return rows
    marked = []
    for r in rows:
        author_mark = marks.get(canonical_reference(r.author_reference)) if r.author_reference else None
        covering = author_mark if author_mark is not None and author_mark.kind == "author" else None
        marked.append(replace(r, mark=marks.get(canonical_reference(r.reference)) or covering, author_mark=author_mark))
    return marked


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    next_cursor: str | None
    overdue_count: int  # up to OVERDUE_COUNT_LIMIT + 1
    queues: list[tuple[str, str]]  # (slug, name) for the filter


def _filtered(query, operator: OperatorUser, wanted: QueueFilter, now: datetime, queue_ids: dict[str, str]):
    query = query.where(S.installation_id == operator.installation_id, S.state == wanted.state.value)
    if wanted.queue:
        if wanted.queue not in queue_ids:
            raise ApiError(400, "queue_filter_invalid", "No queue with that slug.", "queue")
        query = query.where(S.queue_id == queue_ids[wanted.queue])
    if wanted.category:
        query = query.where(S.categories.contains(f"|{wanted.category}|", autoescape=True))
    if wanted.reason:
        query = query.where(S.reasons.contains(f"|{wanted.reason}|", autoescape=True))
    if wanted.received_from or wanted.received_to:
        window = [Report.subject_id == S.id]
        if wanted.received_from:
            window.append(Report.created_at >= wanted.received_from)
        if wanted.received_to:
            window.append(Report.created_at < wanted.received_to)
        query = query.where(exists().where(*window))
    if wanted.assignment is Assignment.MINE:
        query = query.where(S.claimed_by_id == operator.id, claim_active_sql(now))
    elif wanted.assignment is Assignment.UNASSIGNED:
        query = query.where(~claim_active_sql(now))
    if wanted.search:
        query = query.where(S.search_text.contains(wanted.search, autoescape=True))
    return query


def _after(sort: QueueSort, position: tuple):
    """Rows after the cursor's (value, id) in the sort's order."""
    value, row_id = position
    if sort is QueueSort.OLDEST:
        return or_(S.waiting_since > value, and_(S.waiting_since == value, S.id > row_id))
    column = S.last_reported_at if sort is QueueSort.NEWEST else S.open_count
    return or_(column < value, and_(column == value, S.id < row_id))


def _order(sort: QueueSort):
    if sort is QueueSort.OLDEST:
        return (S.waiting_since.asc(), S.id.asc())
    column = S.last_reported_at if sort is QueueSort.NEWEST else S.open_count
    return (column.desc(), S.id.desc())


def queue_page(operator: OperatorUser, wanted: QueueFilter, cursor: str | None = None,
               limit: int = PAGE_SIZE) -> QueuePage:
    """One page of the queue (QUEUE-1) with each row's claim (QUEUE-2) and age and
    overdue mark (QUEUE-4).

    Args:
        wanted: the filter (`app.domain.queue.parse_filter`).
        cursor: the previous page's ``next_cursor``; None for the first page.
        limit: rows per page, 1..200.

    Raises:
        ApiError: 400 ``queue_filter_invalid`` (an unknown queue),
            ``queue_cursor_invalid``.
    """
    session = db.session
    now = utcnow()
    limit = max(1, min(limit, 200))
    queues = _queues(operator)
    queue_ids = {slug: queue_id for slug, _name, queue_id, _target in queues}
    # each queue's time-to-decide target (`queue_targets`, read with the queues: one query less)
    targets = {queue_id: target for _slug, _name, queue_id, target in queues if target is not None}
    holder = HOLDER
    query = (
        select(S, Queue.name, Queue.decide_within_seconds, holder.display_name)
        .outerjoin(Queue, Queue.id == S.queue_id)
        .outerjoin(holder, holder.id == S.claimed_by_id)
    )
    query = _filtered(query, operator, wanted, now, queue_ids)
    position = decode_cursor(wanted.sort, cursor)
    if position is not None:
        query = query.where(_after(wanted.sort, position))
    rows = session.execute(query.order_by(*_order(wanted.sort)).limit(limit + 1)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    page = [_row(subject, name, target, holder_name, operator, now) for subject, name, target, holder_name in rows]
    page = with_marks(page, operator.installation_id)
    next_cursor = encode_cursor(wanted.sort, sort_key(wanted.sort, rows[-1][0])) if more else None
    return QueuePage(page, next_cursor, _overdue_count(session, operator, wanted, now, queue_ids, targets),
                     [(slug, name) for slug, name, _id, _target in queues])


def _queues(operator: OperatorUser):
    return db.session.execute(select(Queue.slug, Queue.name, Queue.id, Queue.decide_within_seconds).where(
        Queue.installation_id == operator.installation_id).order_by(Queue.name)).all()


def queue_choices(operator: OperatorUser) -> list[tuple[str, str]]:
    """(slug, name) of the installation's queues, for the filter even when it was refused (QUEUE-1)."""
    return [(slug, name) for slug, name, _id, _target in _queues(operator)]


def _overdue_count(session, operator, wanted: QueueFilter, now: datetime, queue_ids, targets) -> int:
    if not targets:
        return 0
    query = _filtered(select(S.id), operator, wanted, now, queue_ids).where(overdue_sql(now, targets))
    return session.scalar(select(func.count()).select_from(query.limit(OVERDUE_COUNT_LIMIT + 1).subquery()))


def _row(subject: ReportSubject, queue_name, target, holder_name, operator: OperatorUser, now: datetime) -> QueueRow:
    holds = claim_active(subject.claimed_by_id, subject.claimed_until, now)
    return QueueRow(
        id=subject.id, reference=subject.reference, kind=subject.kind, state=subject.state,
        open_count=subject.open_count, report_count=subject.report_count,
        categories=words(subject.categories), reasons=words(subject.reasons), preview=subject.preview,
        author_reference=subject.author_reference, author_name=subject.author_name,
        first_reported_at=subject.first_reported_at, last_reported_at=subject.last_reported_at,
        waiting_since=subject.waiting_since, age_seconds=age_seconds(subject.waiting_since, now),
        queue_name=queue_name, due_at=due_at(subject.waiting_since, target),
        overdue=is_overdue(subject.state, subject.waiting_since, target, now),
        claimed_by=holder_name if holds else None, claimed_until=subject.claimed_until if holds else None,
        claimed_by_me=holds and subject.claimed_by_id == operator.id,
        erased_at=subject.erased_at, erased_reason=subject.erased_reason,
    )


def subject_detail(operator: OperatorUser, subject_id: str):
    """The subject row and its reports, newest first (None when not this installation's)."""
    subject = db.session.scalar(select(S).where(S.id == subject_id, S.installation_id == operator.installation_id))
    if subject is None:
        return None
    reports = db.session.scalars(select(Report).where(Report.subject_id == subject.id)
                                 .order_by(Report.created_at.desc(), Report.id.desc()).limit(500)).all()
    return subject, reports
