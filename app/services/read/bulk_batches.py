"""What the console shows of bulk batches (SPEC BULK-2, BULK-3, BULK-4, BULK-6).

The list of batches (keyset, newest first) and one batch: its dry-run counts with
samples (and the newest evidence of each sampled subject), its items a
page at a time with their proposals' states and receipts, its ledger with the rate
and the time left, and for a submitted batch the drift since its dry run, resolved
again read-only. Every function runs a fixed number of queries, whatever the number
of items: rows are joined or grouped, never loaded one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, tuple_

from app.domain.bulk.batch import SAMPLE_SIZE, Ledger, Outcome, approval_verdict, ledger_of
from app.domain.case_states import BatchState
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.states import EFFECTIVE_STATES
from app.extensions import db
from app.models import ActionProposal, BulkBatch, BulkItem, OperatorUser, ReportEvidence
from app.services.bulk.progress import ledger, ledger_rows
from app.services.read.pagination import decode_cursor, encode_cursor
from app.services.read.review import newest_evidence, undo_marks

P = ActionProposal
PAGE_SIZE = 50
ITEM_PAGE_SIZE = 50
RATE_WINDOW_SECONDS = 60
FINISHED = frozenset({BatchState.COMPLETED, BatchState.CANCELLED, BatchState.REJECTED, BatchState.EXPIRED})
LIVE = frozenset({BatchState.RUNNING, BatchState.PAUSED})  # the page polls while the batch is one of these
UNDO_GONE = frozenset({BatchState.REJECTED, BatchState.EXPIRED, BatchState.CANCELLED})  # an undo no longer standing
CONTROL_ROLES = ("moderator", "reviewer", "admin")  # who sees pause, resume, cancel (the service decides)


@dataclass(frozen=True)
class Offer:
    """A button: shown at all, usable by this operator, and why not when it is not."""

    shown: bool = False
    allowed: bool = False
    reason: str = ""

    def __bool__(self) -> bool:
        return self.shown


@dataclass(frozen=True)
class BatchRow:
    """One line of the batch list: the batch, its maker's name and its ledger."""

    batch: BulkBatch
    maker_name: str
    ledger: Ledger


@dataclass(frozen=True)
class BatchPage:
    rows: list[BatchRow]
    next_cursor: str | None


@dataclass(frozen=True)
class ItemRow:
    """One item of a batch with its proposal's state, error and receipt status."""

    position: int
    subject_reference: str
    kind: str
    line: int | None
    outcome: str
    detail: str | None
    skip_code: str | None
    proposal_id: str | None
    state: str | None
    terminal: bool | None
    last_error_code: str | None
    receipt_status: str | None


@dataclass(frozen=True)
class Sample:
    """A sampled item of one outcome, with the newest evidence sent for its subject (if any)."""

    position: int
    subject_reference: str
    kind: str
    detail: str | None
    evidence: list[ReportEvidence] = field(default_factory=list)
    report_reference: str | None = None  # the public reference of the evidence's report


@dataclass(frozen=True)
class Progress:
    """The running view (BULK-6): the ledger, items applied per second over the last
    minute, and the seconds left at that rate (None while nothing was applied)."""

    ledger: Ledger
    rate_per_second: float
    eta_seconds: float | None


@dataclass(frozen=True)
class Drift:
    """The selection resolved again now (BULK-4): the share that differs from the
    frozen list, the configured limit, and why subjects would drop out."""

    share: float | None
    limit: float
    dropped: dict[str, str]
    problem: str | None = None  # the code when it cannot be resolved again

    @property
    def over(self) -> bool:
        return self.share is None or self.share > self.limit


@dataclass(frozen=True)
class BatchOffers:
    submit: Offer = Offer()
    decide: Offer = Offer()
    pause: Offer = Offer()
    resume: Offer = Offer()
    cancel: Offer = Offer()
    undo: Offer = Offer()


@dataclass
class BatchDetail:
    batch: BulkBatch
    maker_name: str
    approver_name: str | None
    samples: dict[str, list[Sample]]
    items: list[ItemRow]
    next_after: int | None
    progress: Progress
    drift: Drift | None
    offers: BatchOffers
    undone_by: list[tuple[str, str]]  # (id, public reference) of undo batches of this one still standing
    undoes_reference: str | None = None  # the public reference of the batch this undo undoes
    undo: dict[str, Any] = field(default_factory=dict)  # proposal id -> UndoMark of the page's items (REV-4)
    now: Any = None
    approval: Any = None  # batch_votes.BatchApproval once submitted (POL-3)

    @property
    def finished(self) -> bool:
        return self.batch.state in FINISHED

    @property
    def live(self) -> bool:
        return self.batch.state in LIVE


def _ledgers(batches: list[BulkBatch]) -> dict[str, Ledger]:
    """Each listed batch's ledger in one grouped query (progress.ledger, for many)."""
    ids = [b.id for b in batches if b.batch_digest is not None]
    grouped: dict[str, list] = {}
    if ids:
        rows = db.session.execute(ledger_rows(BulkItem.batch_id.in_(ids), by_batch=True)).all()
        for batch_id, state, terminal, attempts, skip, count in rows:
            grouped.setdefault(batch_id, []).append((state, bool(terminal), attempts, skip, count))
    return {b.id: ledger_of(grouped.get(b.id, []), b.item_count if b.batch_digest else 0) for b in batches}


def list_batches(operator: OperatorUser, after: str | None = None) -> BatchPage:
    """The operator's installation's batches, newest first, `PAGE_SIZE` at a time.

    Args:
        operator: the signed-in operator (their installation's batches only).
        after: the cursor of the last row shown (`next_cursor`); a malformed one
            reads as the first page.

    Returns:
        The rows (batch, maker's name, ledger) and the next page's cursor, if any.
        Three queries whatever the number of batches or items.
    """
    query = (
        select(BulkBatch, OperatorUser.display_name)
        .join(OperatorUser, OperatorUser.id == BulkBatch.maker_id)
        .where(BulkBatch.installation_id == operator.installation_id)
        .order_by(BulkBatch.created_at.desc(), BulkBatch.id.desc())
        .limit(PAGE_SIZE + 1)
    )
    cursor = decode_cursor(after)
    if cursor is not None:
        query = query.where(tuple_(BulkBatch.created_at, BulkBatch.id) < tuple_(*cursor))
    found = db.session.execute(query).all()
    more, found = len(found) > PAGE_SIZE, found[:PAGE_SIZE]
    ledgers = _ledgers([batch for batch, _ in found])
    rows = [BatchRow(batch, name, ledgers[batch.id]) for batch, name in found]
    last = found[-1][0] if found else None
    return BatchPage(rows, encode_cursor(last.created_at, last.id) if more and last else None)


def _samples(batch: BulkBatch) -> dict[str, list[Sample]]:
    """Up to `SAMPLE_SIZE` items of each outcome, first by position (one query), and
    for each sampled would-act subject the newest evidence the platform sent for it,
    from any report of the installation, however the subject was selected (one more)."""
    rank = func.row_number().over(partition_by=BulkItem.outcome, order_by=BulkItem.position).label("rank")
    inner = (
        select(BulkItem.outcome, BulkItem.position, BulkItem.subject_reference, BulkItem.kind, BulkItem.detail, rank)
        .where(BulkItem.batch_id == batch.id)
        .subquery()
    )
    rows = db.session.execute(
        select(inner).where(inner.c.rank <= SAMPLE_SIZE).order_by(inner.c.outcome, inner.c.position)
    ).all()
    acting = [row.subject_reference for row in rows if row.outcome == Outcome.WOULD_ACT.value]
    evidence = newest_evidence(batch.installation_id, acting)
    samples: dict[str, list[Sample]] = {outcome.value: [] for outcome in Outcome}
    for row in rows:
        found = evidence.get(row.subject_reference) if row.outcome == Outcome.WOULD_ACT.value else None
        samples.setdefault(row.outcome, []).append(
            Sample(row.position, row.subject_reference, row.kind, row.detail,
                   [found[0]] if found else [], found[1] if found else None))
    return samples


def _items(batch: BulkBatch, after: int | None) -> tuple[list[ItemRow], int | None]:
    """One page of items by position, joined to their proposals (one query)."""
    query = (
        select(BulkItem.position, BulkItem.subject_reference, BulkItem.kind, BulkItem.line, BulkItem.outcome,
               BulkItem.detail, BulkItem.skip_code, BulkItem.proposal_id, P.state, P.delivery_terminal,
               P.last_error_code, P.last_receipt)
        .outerjoin(P, P.id == BulkItem.proposal_id)
        .where(BulkItem.batch_id == batch.id)
        .order_by(BulkItem.position)
        .limit(ITEM_PAGE_SIZE + 1)
    )
    if after is not None:
        query = query.where(BulkItem.position > after)
    rows = db.session.execute(query).all()
    more, rows = len(rows) > ITEM_PAGE_SIZE, rows[:ITEM_PAGE_SIZE]
    items = [
        ItemRow(r.position, r.subject_reference, r.kind, r.line, r.outcome, r.detail, r.skip_code, r.proposal_id,
                r.state, r.delivery_terminal, r.last_error_code,
                r.last_receipt.get("status") if isinstance(r.last_receipt, dict) else None)
        for r in rows
    ]
    return items, (rows[-1].position if more and rows else None)


def progress_of(batch: BulkBatch) -> Progress:
    """The ledger (BULK-6), the rate (items that took effect per second over the last
    minute, or since approval when that is shorter) and the time left at that rate.
    Two queries."""
    book = ledger(db.session, batch)
    if batch.approved_at is None or batch.batch_digest is None:
        return Progress(book, 0.0, None)
    now = utcnow()
    window = max(1.0, min(RATE_WINDOW_SECONDS, (now - batch.approved_at).total_seconds()))
    recent = db.session.scalar(
        select(func.count()).select_from(P).where(
            P.bulk_batch_id == batch.id,
            P.state.in_([s.value for s in EFFECTIVE_STATES]),
            P.updated_at >= now - timedelta(seconds=window),
        )
    ) or 0
    rate = recent / window
    eta = (book.open / rate) if rate > 0 else (0.0 if book.open == 0 else None)
    return Progress(book, rate, eta)


def drift_of(batch: BulkBatch, limit: float) -> Drift:
    """The drift a reviewer would meet now (BULK-4), read-only: the selection resolved
    again and compared with the frozen list; nothing is written.

    Args:
        limit: the configured share (``BULK_DRIFT_SHARE``).
    """
    from app.services.bulk.batch_approval import drift_now

    try:
        share, skipped = drift_now(db.session, batch)
    except ApiError as error:
        return Drift(None, limit, {}, error.code)
    return Drift(share, limit, dict(skipped.values()))


def _offers(batch: BulkBatch, operator: OperatorUser, makers: set[str] | None, undone: bool = False) -> BatchOffers:
    now = utcnow()
    state = batch.state
    submit = decide = pause = resume = cancel = undo = Offer()
    if state == BatchState.DRY_RUN and operator.has_role("moderator"):
        if batch.maker_id != operator.id:
            submit = Offer(True, False, "Only the moderator who ran this dry run can submit it.")
        elif batch.expires_at <= now:
            submit = Offer(True, False, "This dry run expired; start a new one.")
        elif batch.item_count == 0:
            submit = Offer(True, False, "No subject of this dry run would be acted on.")
        else:
            submit = Offer(True, True)
    if state == BatchState.SUBMITTED and makers is not None:
        verdict = approval_verdict(operator.id, operator.roles, makers, undo=batch.kind == "undo")
        if not verdict:
            decide = Offer(True, False, verdict.reason)
        elif batch.expires_at <= now:
            decide = Offer(True, False, "This batch's authorization expired; start a new dry run.")
        else:
            decide = Offer(True, True)
    if operator.has_role(*CONTROL_ROLES):
        pause = Offer(state == BatchState.RUNNING, True)
        resume = Offer(state == BatchState.PAUSED, True)
        cancel = Offer(state in LIVE, True)
        undo = Offer(batch.kind == "enforce" and not undone and state in (BatchState.COMPLETED, BatchState.CANCELLED),
                     True)
    return BatchOffers(submit, decide, pause, resume, cancel, undo)


def _policy_offer(batch: BulkBatch, approval, operator: OperatorUser) -> Offer:
    """Approve or reject under a policy other than the default (POL-2): shown with
    buttons only when the viewer may vote."""
    if batch.expires_at <= utcnow():
        return Offer(True, False, "This batch's authorization expired; start a new dry run.")
    if approval.may_approve or approval.may_reject:
        return Offer(True, True)
    return Offer(True, False, approval.refusal or "")


def batch_digest_of(operator: OperatorUser, batch_id: str) -> tuple[bool, str | None]:
    """(whether `batch_id` names a batch of the operator's installation, its batch
    digest or None before submission); one query."""
    if not isinstance(batch_id, str) or len(batch_id) > 100:
        return False, None
    row = db.session.execute(select(BulkBatch.batch_digest).where(
        BulkBatch.id == batch_id, BulkBatch.installation_id == operator.installation_id)).first()
    return (row is not None), (row[0] if row is not None else None)


def public_reference_of(operator: OperatorUser, batch_id: str) -> str | None:
    """The public reference (``B-XXXX``) of a batch of the operator's installation, or
    None (one query)."""
    return db.session.scalar(select(BulkBatch.public_reference).where(
        BulkBatch.id == batch_id, BulkBatch.installation_id == operator.installation_id))


def batch_detail(operator: OperatorUser, batch_id: str, *, after: Any = None, drift_limit: float = 0.10,
                 with_drift: bool = True) -> BatchDetail | None:
    """One batch as its page shows it (BULK-2..8).

    Args:
        operator: the signed-in operator (a batch of another installation is None).
        batch_id: the batch's id (any text; an unknown one is None).
        after: the position of the last item shown (text or int); bad values read
            as the first page.
        drift_limit: the configured drift share, shown beside the measured one.
        with_drift: resolve the selection again for a submitted batch (BULK-4);
            the polled fragment leaves it out.

    Returns:
        The detail, or None. A fixed number of queries whatever the item count.
    """
    if not isinstance(batch_id, str) or len(batch_id) > 100:
        return None
    batch = db.session.get(BulkBatch, batch_id)
    if batch is None or batch.installation_id != operator.installation_id:
        return None
    try:
        position = int(after) if after not in (None, "") else None
    except (TypeError, ValueError):
        position = None
    if position is not None and not -1 <= position < 10**9:
        position = None
    names = dict(db.session.execute(select(OperatorUser.id, OperatorUser.display_name).where(
        OperatorUser.id.in_({batch.maker_id, batch.approved_by} - {None}))).all())
    makers = None
    if batch.state == BatchState.SUBMITTED:
        from app.services.bulk.batch_approval import batch_makers

        makers = batch_makers(db.session, batch)
    items, next_after = _items(batch, position)
    undone_by = [(id, reference) for id, reference, state in db.session.execute(
        select(BulkBatch.id, BulkBatch.public_reference, BulkBatch.state).where(BulkBatch.undoes_batch_id == batch.id)
        .order_by(BulkBatch.created_at)).all() if state not in UNDO_GONE]
    undoes_reference = db.session.scalar(select(BulkBatch.public_reference).where(
        BulkBatch.id == batch.undoes_batch_id)) if batch.undoes_batch_id else None
    drift = drift_of(batch, drift_limit) if with_drift and batch.state == BatchState.SUBMITTED else None
    offers = _offers(batch, operator, makers, undone=bool(undone_by))
    approval = None
    if batch.batch_digest is not None:
        from app.services.bulk.batch_votes import approval_panel

        approval = approval_panel(db.session, batch, operator, makers, utcnow())
        if not approval.default and batch.state == BatchState.SUBMITTED:
            offers = replace(offers, decide=_policy_offer(batch, approval, operator))
    return BatchDetail(
        batch=batch,
        maker_name=names.get(batch.maker_id, batch.maker_id),
        approver_name=names.get(batch.approved_by) if batch.approved_by else None,
        samples=_samples(batch) if with_drift else {},
        items=items,
        next_after=next_after,
        progress=progress_of(batch),
        drift=drift,
        offers=offers,
        undone_by=undone_by,
        undoes_reference=undoes_reference,
        undo=undo_marks(i.proposal_id for i in items if i.proposal_id),
        now=utcnow(),
        approval=approval,
    )

