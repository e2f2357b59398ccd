"""The rules of one bulk batch (SPEC BULK-2..7): what a dry run says of each subject,
the digests that freeze the list and bind the approval, the drift guard, the cap per
role, who may approve, and the ledger every item is counted in.

Pure: the services read the database into the plain values below and ask here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from app.domain.case_states import BatchState
from app.domain.digests import canonical_json, sha256_digest
from app.domain.errors import ApiError
from app.domain.maker_checker import Verdict, approver_verdict
from app.domain.states import EFFECTIVE_STATES, ProposalState, is_terminal

DEFAULT_CAP = 1000  # items per batch for a role without a cap of its own (BULK-5)
DEFAULT_DRIFT_SHARE = 0.10  # a re-resolved selection may differ by this share (BULK-4)
DRY_RUN_SECONDS = 3600  # a dry run not submitted within this expires (BULK-2)
SAMPLE_SIZE = 5  # samples of each outcome shown with the counts

DRIFTED = "bulk_selection_drifted"


class Outcome(StrEnum):
    """What a dry run says of one subject (BULK-2)."""

    WOULD_ACT = "would_act"
    ALREADY_APPLIED = "already_applied"  # an applied, not undone action of this code on it
    PROTECTED = "protected"
    INVALID = "invalid"  # the action cannot act on it (its reports closed, the input refused)
    DUPLICATE = "duplicate"  # an action of this code on it is already under way


@dataclass(frozen=True)
class Standing:
    """A subject as the database has it now, for the action being taken.

    Attributes:
        applied: an applied, not compensated action of the same code on this target.
        pending: an unresolved action of the same code on this target (another batch,
            or a single decision awaiting approval or delivery).
        protected: the subject is on the protected list.
        problem: why the action cannot act on it (an error code), else None.
    """

    applied: bool = False
    pending: bool = False
    protected: bool = False
    problem: str | None = None


def classify(standing: Standing) -> tuple[Outcome, str | None]:
    """The dry-run outcome of one subject and its detail code (BULK-2).

    The order matters: what cannot be acted on is invalid whatever else holds, a
    protected subject is never acted on in bulk, and a subject already in the target
    state or already being acted on is not acted on twice.
    """
    if standing.problem:
        return Outcome.INVALID, standing.problem
    if standing.protected:
        return Outcome.PROTECTED, "bulk_subject_protected"
    if standing.applied:
        return Outcome.ALREADY_APPLIED, "bulk_subject_already_applied"
    if standing.pending:
        return Outcome.DUPLICATE, "bulk_subject_action_pending"
    return Outcome.WOULD_ACT, None


def dry_run_digest(action: Mapping, items: Iterable[tuple[int, str, str, str]]) -> str:
    """The digest of a frozen item list (BULK-2).

    Args:
        action: what the batch does, as plain JSON (component version, action and
            decision codes, node).
        items: (position, subject reference, kind, outcome) in position order.
    """
    return sha256_digest(canonical_json({"action": dict(action), "items": [list(item) for item in items]}))


def batch_digest(batch_id: str, decision_code: str, item_digests: Iterable[str]) -> str:
    """The digest one approval binds (BULK-3): the batch, its decision and the sorted
    payload digests of its items, so an approval authorizes exactly those items."""
    return sha256_digest(
        canonical_json({"batch": batch_id, "decision_code": decision_code, "items": sorted(item_digests)})
    )


def drift_share(frozen: Iterable[str], current: Iterable[str]) -> float:
    """How far a selection resolved again is from the frozen one (BULK-4): the
    subjects that would act in one and not the other, over the frozen count."""
    before, now = set(frozen), set(current)
    return len(before ^ now) / max(1, len(before))


def drifted(share: float, limit: float) -> bool:
    """Whether the drift refuses the approval (BULK-4): strictly above the limit."""
    return share > limit


def cap_for(roles: Iterable[str], caps: Mapping[str, int]) -> int:
    """Items per batch the holder of `roles` may take (BULK-5): the largest cap of
    their roles, `DEFAULT_CAP` for a role with none set."""
    return max((caps.get(role, DEFAULT_CAP) for role in roles), default=DEFAULT_CAP)


def cap_problem(count: int, cap: int) -> str | None:
    """``bulk_selection_over_cap`` when `count` items exceed `cap` (BULK-5)."""
    return "bulk_selection_over_cap" if count > cap else None


def approval_verdict(approver_id: str, roles: Iterable[str], makers: Iterable[str | None], *,
                     undo: bool = False) -> Verdict:
    """Whether an operator may approve or reject a batch (BULK-3, FOUR-1): a reviewer
    who made neither the batch nor the decision of any of its items; for an undo
    (BULK-8, `undo` True) also not the maker or approver of the batch it undoes, and
    the refusal says so."""
    verdict = approver_verdict(approver_id, roles, makers)
    if not verdict and approver_id in set(makers):
        if undo:
            return Verdict(False, "You started this undo, or started or approved the batch it undoes; "
                                  "a reviewer who did neither must check it.")
        return Verdict(False, "You started this bulk action or made a decision in it; a second reviewer must check it.")
    return verdict


def checked_reason(reason: object, verb: str) -> str:
    """The reason given for ending a batch (BULK-3 reject, BULK-7 cancel), stripped.

    Args:
        reason: what the operator typed (any value: a form may send none).
        verb: what happens to the batch ("rejected", "cancelled"), for the message.

    Raises:
        ApiError: 400 ``bulk_reason_invalid`` unless 3 to 5,000 characters.
    """
    text = reason.strip() if isinstance(reason, str) else ""
    if not 3 <= len(text) <= 5000:
        raise ApiError(400, "bulk_reason_invalid", f"Say why the batch is {verb} (3 to 5,000 characters).", "reason")
    return text


class Bucket(StrEnum):
    """Where the ledger counts an item (BULK-6); every item is in exactly one."""

    NOT_STARTED = "not_started"
    IN_FLIGHT = "in_flight"
    APPLIED = "applied"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


LEDGER = tuple(Bucket)


def bucket(state: str, delivery_terminal: bool, attempts: int, skip_code: str | None) -> Bucket:
    """The ledger bucket of one item (BULK-6, BULK-7).

    Args:
        state: its proposal's state.
        delivery_terminal: its proposal's terminal flag.
        attempts: its proposal's delivery attempts so far.
        skip_code: the item's skip code (set when it was skipped, never sent).

    An item is skipped when its skip code is set and it was never sent; applied
    when its action took effect (also once compensated); failed when its delivery
    ended without effect; cancelled when stopped before sending (a cancel, or the
    batch rejected); in flight once an attempt was made and it is not resolved; not
    started before its first attempt.
    """
    if ProposalState(state) in EFFECTIVE_STATES:
        return Bucket.APPLIED
    if skip_code is not None and attempts == 0:
        return Bucket.SKIPPED
    if state in (ProposalState.CANCELLED, ProposalState.REJECTED):  # never sent
        return Bucket.CANCELLED
    if is_terminal(state, delivery_terminal):
        return Bucket.FAILED
    return Bucket.IN_FLIGHT if attempts > 0 else Bucket.NOT_STARTED


@dataclass(frozen=True)
class Ledger:
    """An item count per bucket; `total` is the batch's item count (BULK-6)."""

    counts: Mapping[Bucket, int]
    total: int

    def __getitem__(self, name: Bucket) -> int:
        return self.counts.get(name, 0)

    @property
    def adds_up(self) -> bool:
        """The invariant: not started + in flight + applied + failed + skipped +
        cancelled = items."""
        return sum(self[b] for b in LEDGER) == self.total

    @property
    def open(self) -> int:
        """Items not yet resolved (not started or in flight)."""
        return self[Bucket.NOT_STARTED] + self[Bucket.IN_FLIGHT]

    @property
    def done_share(self) -> float:
        """Resolved items over all, 0..1 (the progress bar)."""
        return (self.total - self.open) / self.total if self.total else 1.0


def ledger_of(rows: Iterable[tuple[str, bool, int, str | None, int]], total: int) -> Ledger:
    """A ledger from grouped rows (state, terminal, attempts, skip code, count)."""
    counts: dict[Bucket, int] = {}
    for state, terminal, attempts, skip_code, count in rows:
        name = bucket(state, terminal, attempts, skip_code)
        counts[name] = counts.get(name, 0) + count
    return Ledger(counts, total)


# -- undo (BULK-8) ------------------------------------------------------------------

UNDO_ALREADY_COMPENSATED = "bulk_undo_already_compensated"
UNDO_ALREADY_REVERSED = "bulk_undo_already_reversed"
UNDO_TARGET_CHANGED = "bulk_undo_target_changed"
UNDOABLE = frozenset({BatchState.COMPLETED, BatchState.CANCELLED})  # finished: nothing more will be sent
UNDO_OPEN = frozenset({BatchState.SUBMITTED, BatchState.RUNNING, BatchState.PAUSED})


def undo_refusal(kind: str, state: str, undo_states: Iterable[str]) -> tuple[str, str] | None:
    """Why a batch cannot be undone now, as (code, message), else None (BULK-8).

    Args:
        kind: the batch's kind (``enforce`` or ``undo``).
        state: its state.
        undo_states: the states of the undo batches already made of it.

    Only a finished enforcement batch (completed or cancelled) is undone, once: not
    while an undo of it is open, nor after one completed. An undo rejected, expired or
    cancelled leaves the rest to a new one (what it applied is skipped then).
    """
    if kind != "enforce":
        return "bulk_undo_unavailable", "An undo is not undone; compensate its actions one by one."
    if state not in UNDOABLE:
        return "bulk_batch_not_finished", f"This bulk action is {state}; only a completed or cancelled one is undone."
    states = set(undo_states)
    if states & UNDO_OPEN:
        return "bulk_undo_already_open", "An undo of this bulk action is already waiting or running."
    if BatchState.COMPLETED in states:
        return "bulk_batch_already_undone", "This bulk action was already undone."
    return None


@dataclass(frozen=True)
class LaterAction:
    """Another proposal touching an applied item's target, created after it.

    Attributes:
        compensates: it compensates the item's proposal.
        reverses: it is the item's temporary action's reversal (TEMP-2).
        state, delivery_terminal: its state and terminal flag.
    """

    compensates: bool
    reverses: bool
    state: str
    delivery_terminal: bool


def undo_skip(later: Iterable[LaterAction]) -> str | None:
    """Why an undo leaves an applied item alone, else None (BULK-8).

    An item changed since it was applied is not compensated: a compensation of it
    that took effect or is under way (``bulk_undo_already_compensated``), its
    reversal applied (``bulk_undo_already_reversed``; a reversal still scheduled is
    cancelled when the undo applies, TEMP-3), or any other later action on its target
    that took effect or is under way, e.g. a newer takedown or a restore
    (``bulk_undo_target_changed``). One rejected, cancelled or failed for good
    changed nothing.
    """
    found: set[str] = set()
    for action in later:
        effective = ProposalState(action.state) in EFFECTIVE_STATES
        live = effective or not is_terminal(action.state, action.delivery_terminal)
        if action.compensates and live:
            found.add(UNDO_ALREADY_COMPENSATED)
        elif action.reverses:
            if effective:
                found.add(UNDO_ALREADY_REVERSED)
        elif live:
            found.add(UNDO_TARGET_CHANGED)
    for code in (UNDO_ALREADY_COMPENSATED, UNDO_ALREADY_REVERSED, UNDO_TARGET_CHANGED):
        if code in found:
            return code
    return None
