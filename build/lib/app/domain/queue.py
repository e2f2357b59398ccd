"""The moderator's queue: reports grouped by subject, filters, keyset cursors, claims
and time-to-decide (SPEC QUEUE-1, QUEUE-2, QUEUE-4).

Pure rules; `app.models.queue` holds the SQL twin of each predicate here (the claim
and the overdue test) and `tests/models/test_queue_predicates.py` compares them.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Mapping

from .clock import parse_iso
from .errors import ApiError

PAGE_SIZE = 50
SEARCH_MAX = 200
CLAIM_SECONDS_DEFAULT = 15 * 60
CLAIM_SECONDS_MAX = 8 * 3600
PREVIEW_CHARACTERS = 280
SEARCHED_SUMMARIES = 20  # the latest reports' summaries a search reads
SEARCHED_SUMMARY_CHARACTERS = 300  # each summary's share of the search text
SEARCH_TEXT_CHARACTERS = 4000
COUNT_MAX = 2**31 - 1  # a cursor's report count fits a 32-bit integer column


class SubjectState(StrEnum):
    """A subject is open while one of its reports is open (QUEUE-1)."""

    OPEN = "open"
    DONE = "done"


class QueueSort(StrEnum):
    OLDEST = "oldest"  # longest waiting first (QUEUE-4)
    NEWEST = "newest"  # latest report first
    MOST = "most"  # most open reports first


class Assignment(StrEnum):
    ANY = "any"
    MINE = "mine"
    UNASSIGNED = "unassigned"


SORT_LABELS = {
    QueueSort.OLDEST: "Waiting longest",
    QueueSort.NEWEST: "Latest report",
    QueueSort.MOST: "Most reports",
}
ASSIGNMENT_LABELS = {
    Assignment.ANY: "Anyone",
    Assignment.MINE: "Claimed by me",
    Assignment.UNASSIGNED: "Unclaimed",
}


@dataclass(frozen=True)
class QueueFilter:
    """What a moderator asked the queue for (QUEUE-1). Empty strings mean "any"."""

    state: SubjectState = SubjectState.OPEN
    queue: str = ""  # a queue's slug
    category: str = ""
    reason: str = ""
    received_from: datetime | None = None  # a report received at or after (UTC)
    received_to: datetime | None = None  # ... and before
    assignment: Assignment = Assignment.ANY
    search: str = ""  # subject, author or text, case-insensitive
    sort: QueueSort = QueueSort.OLDEST

    def query_args(self) -> dict[str, str]:
        """The filter as the query string that asks for it (for links that keep it)."""
        args = {
            "state": self.state.value,
            "queue": self.queue,
            "category": self.category,
            "reason": self.reason,
            "from": self.received_from.strftime("%Y-%m-%dT%H:%M") if self.received_from else "",
            "to": self.received_to.strftime("%Y-%m-%dT%H:%M") if self.received_to else "",
            "assigned": self.assignment.value,
            "q": self.search,
            "sort": self.sort.value,
        }
        return {key: value for key, value in args.items() if value}


def _choice(enum, value: str | None, default, field: str):
    if not value:
        return default
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise ApiError(400, "queue_filter_invalid", f"{field} must be one of: {allowed}.", field) from None


def _moment(value: str | None, field: str) -> datetime | None:
    if not value:
        return None
    text = value.strip()
    if len(text) == 16:  # an <input type=datetime-local> sends minutes without a zone: UTC
        text += ":00Z"
    try:
        return parse_iso(text)
    except (ValueError, TypeError, OverflowError):  # OverflowError: the calendar's ends
        raise ApiError(400, "queue_filter_invalid", f"{field} must be a date and time (ISO-8601, UTC).", field) from None


def _word(value: str | None, field: str, limit: int = 100) -> str:
    text = (value or "").strip()
    if len(text) > limit:
        raise ApiError(400, "queue_filter_invalid", f"{field} is limited to {limit} characters.", field)
    return text


def _one_word(value: str | None, field: str) -> str:
    """A category or reason: one word, so no ``|`` (the stored sets' delimiter)."""
    text = _word(value, field)
    if "|" in text:
        raise ApiError(400, "queue_filter_invalid", f"{field} is one word, without '|'.", field)
    return text


def parse_filter(args: Mapping[str, str]) -> QueueFilter:
    """Read a queue filter from query arguments (QUEUE-1).

    Args:
        args: ``state`` (open|done), ``queue`` (slug), ``category``, ``reason``,
            (one word each, no ``|``), ``from``/``to`` (ISO-8601 UTC, or ``YYYY-MM-DDTHH:MM`` read as UTC),
            ``assigned`` (any|mine|unassigned), ``q`` (search, up to 200
            characters), ``sort`` (oldest|newest|most).

    Raises:
        ApiError: 400 ``queue_filter_invalid`` naming the argument.
    """
    received_from = _moment(args.get("from"), "from")
    received_to = _moment(args.get("to"), "to")
    if received_from and received_to and received_to <= received_from:
        raise ApiError(400, "queue_filter_invalid", "to must be after from.", "to")
    return QueueFilter(
        state=_choice(SubjectState, args.get("state"), SubjectState.OPEN, "state"),
        queue=_word(args.get("queue"), "queue"),
        category=_one_word(args.get("category"), "category"),
        reason=_one_word(args.get("reason"), "reason"),
        received_from=received_from,
        received_to=received_to,
        assignment=_choice(Assignment, args.get("assigned"), Assignment.ANY, "assigned"),
        search=_word(args.get("q"), "q", SEARCH_MAX).lower(),
        sort=_choice(QueueSort, args.get("sort"), QueueSort.OLDEST, "sort"),
    )


# -- keyset cursors ------------------------------------------------------------------


def sort_key(sort: QueueSort, row: Any) -> list:
    """The keyset position of a subject row under `sort`: (value, id), JSON-ready."""
    if sort is QueueSort.MOST:
        return [row.open_count, row.id]
    moment = row.waiting_since if sort is QueueSort.OLDEST else row.last_reported_at
    return [moment.isoformat(), row.id]


def encode_cursor(sort: QueueSort, key: list) -> str:
    """An opaque cursor for the page after the row at `key` (keyset pagination)."""
    raw = json.dumps([sort.value, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(sort: QueueSort, cursor: str | None) -> tuple | None:
    """The (value, id) a cursor stands for, with the moment as a datetime.

    Raises:
        ApiError: 400 ``queue_cursor_invalid`` for a cursor of another sort or one
            that was not made here (a count that is a bool or outside 0..2**31-1, a
            moment at the calendar's ends).
    """
    if not cursor:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, value, row_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if kind != sort.value or not isinstance(row_id, str):
            raise ValueError
        if sort is QueueSort.MOST:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= COUNT_MAX:
                raise ValueError
            return value, row_id
        return parse_iso(value), row_id
    except (ValueError, TypeError, OverflowError, binascii.Error, UnicodeDecodeError):
        raise ApiError(400, "queue_cursor_invalid", "That page link is out of date; start from the first page.") from None


# -- claims (QUEUE-2) --------------------------------------------------------------------


def claim_active(claimed_by: str | None, claimed_until: datetime | None, now: datetime) -> bool:
    """Whether a claim holds at `now`: someone holds it and it has not expired."""
    return claimed_by is not None and claimed_until is not None and claimed_until > now


def claim_blocks(claimed_by: str | None, claimed_until: datetime | None, operator_id: str, now: datetime) -> bool:
    """QUEUE-2: another moderator's unexpired claim blocks `operator_id`'s claim and
    decision; an expired or released claim blocks nobody, one's own never."""
    return claim_active(claimed_by, claimed_until, now) and claimed_by != operator_id


def claim_until(now: datetime, seconds: int) -> datetime:
    """When a claim taken at `now` for `seconds` expires.

    Raises:
        ApiError: 400 ``queue_claim_invalid`` outside 60 seconds .. 8 hours.
    """
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not 60 <= seconds <= CLAIM_SECONDS_MAX:
        raise ApiError(400, "queue_claim_invalid", "A claim lasts from one minute to eight hours.", "seconds")
    return now + timedelta(seconds=seconds)


# -- time to decide (QUEUE-4) --------------------------------------------------------------


def age_seconds(waiting_since: datetime, now: datetime) -> int:
    """How long the subject's oldest open report has waited, in whole seconds."""
    return max(0, int((now - waiting_since).total_seconds()))


def is_overdue(state: str, waiting_since: datetime, decide_within_seconds: int | None, now: datetime) -> bool:
    """QUEUE-4: an open subject whose oldest open report has waited longer than its
    queue's time-to-decide target. A queue without a target has nothing overdue."""
    if state != SubjectState.OPEN or decide_within_seconds is None:
        return False
    return waiting_since + timedelta(seconds=decide_within_seconds) < now


def due_at(waiting_since: datetime, decide_within_seconds: int | None) -> datetime | None:
    """When the subject becomes overdue (None without a target)."""
    if decide_within_seconds is None:
        return None
    return waiting_since + timedelta(seconds=decide_within_seconds)


# -- the subject's row, from its reports -------------------------------------------------


@dataclass(frozen=True)
class ReportFacts:
    """What one report adds to its subject's row."""

    created_at: datetime
    open: bool
    queue_id: str | None
    category: str
    reason: str
    summary: str
    content_text: str | None
    author_reference: str | None
    author_name: str | None
    report_id: str = ""  # breaks ties between reports of the same moment


@dataclass(frozen=True)
class SubjectSummary:
    state: SubjectState
    open_count: int
    report_count: int
    waiting_since: datetime
    first_reported_at: datetime
    last_reported_at: datetime
    queue_id: str | None
    categories: str  # "|spam|abuse|": a delimited set a LIKE can match exactly
    reasons: str
    preview: str
    author_reference: str | None
    author_name: str | None
    search_text: str


def delimited(values) -> str:
    """A set of words as ``|a|b|`` (sorted, empty words left out)."""
    words = sorted({value for value in values if value})
    return "|" + "|".join(words) + "|" if words else ""


def words(text: str) -> list[str]:
    """The words of a delimited set, in order."""
    return [word for word in (text or "").split("|") if word]


@dataclass(frozen=True)
class SubjectAggregate:
    """What a subject's row is made from, over all its reports; `aggregate` computes
    it from the reports in Python, `app.models.queue.aggregate_sql` in SQL."""

    open_count: int
    report_count: int
    oldest_open_at: datetime | None
    first_at: datetime
    last_at: datetime
    queue_id: str | None  # of the oldest open report, else of the latest
    categories: frozenset[str]  # of the open reports, else of all
    reasons: frozenset[str]
    latest_text: tuple[str | None, str | None, str | None] | None  # (content, author ref, author name)
    latest_summary: str  # the latest non-empty summary
    summaries: tuple[str, ...]  # the latest SEARCHED_SUMMARIES, oldest first


def aggregate(facts: list[ReportFacts]) -> SubjectAggregate:
    """The aggregate of a subject's reports (at least one), ordered by arrival."""
    ordered = sorted(facts, key=lambda fact: (fact.created_at, fact.report_id))
    open_reports = [fact for fact in ordered if fact.open]
    counted = open_reports or ordered
    latest_text = next((f for f in reversed(ordered) if f.content_text or f.author_reference), None)
    return SubjectAggregate(
        open_count=len(open_reports),
        report_count=len(ordered),
        oldest_open_at=open_reports[0].created_at if open_reports else None,
        first_at=ordered[0].created_at,
        last_at=ordered[-1].created_at,
        queue_id=(open_reports[0] if open_reports else ordered[-1]).queue_id,
        categories=frozenset(f.category for f in counted if f.category),
        reasons=frozenset(f.reason for f in counted if f.reason),
        latest_text=(latest_text.content_text, latest_text.author_reference, latest_text.author_name)
        if latest_text else None,
        latest_summary=next((f.summary for f in reversed(ordered) if f.summary), ""),
        summaries=tuple(f.summary for f in ordered[-SEARCHED_SUMMARIES:] if f.summary),
    )


def summary_of(reference: str, totals: SubjectAggregate) -> SubjectSummary:
    """The subject's row (QUEUE-1): open and total counts, the age of the oldest open
    report (or, once none is open, the latest report's time, so the keyset order
    stays total), the queue of its oldest open report, the reasons and categories of
    its open reports (of all when none is open), and a preview and author from its
    latest report that carries them (else its latest summary). The search text
    (at most 4,000 characters) holds the reference, author, preview and the latest
    summaries newest first, each cut at 300 characters, so no long report hides
    another's text from the search."""
    content, author_reference, author_name = totals.latest_text or (None, None, None)
    preview = (content or totals.latest_summary)[:PREVIEW_CHARACTERS]
    newest_first = (summary[:SEARCHED_SUMMARY_CHARACTERS] for summary in reversed(totals.summaries))
    searched = [reference, author_reference or "", author_name or "", preview, *newest_first]
    return SubjectSummary(
        state=SubjectState.OPEN if totals.open_count else SubjectState.DONE,
        open_count=totals.open_count,
        report_count=totals.report_count,
        waiting_since=totals.oldest_open_at or totals.last_at,
        first_reported_at=totals.first_at,
        last_reported_at=totals.last_at,
        queue_id=totals.queue_id,
        categories=delimited(totals.categories),
        reasons=delimited(totals.reasons),
        preview=preview,
        author_reference=author_reference,
        author_name=author_name,
        search_text=" ".join(part for part in searched if part).lower()[:SEARCH_TEXT_CHARACTERS],
    )


def summarize(reference: str, facts: list[ReportFacts]) -> SubjectSummary:
    """The subject's row from its reports (at least one): `summary_of(aggregate)`."""
    return summary_of(reference, aggregate(facts))


def without_search(queue_filter: QueueFilter) -> QueueFilter:
    """The same filter with no search (what the page's counts are over)."""
    return replace(queue_filter, search="")
