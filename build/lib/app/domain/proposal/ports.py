"""Which workflow port a proposal answers, and what a waiting run does next
(SPEC WAIT-1, WAIT-2, PREP-7).

A run that waits on an action resumes on a port: ``applied``, ``rejected``,
``timeout`` or ``error``. While the proposal can still change there is no port:
the run keeps waiting, on the approval or on the delivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from app.domain.states import ProposalState, is_effective, is_terminal

from .delivery import DELIVERY_FAILED, Delivery

S = ProposalState
# the port of each terminal state that is not effective (WAIT-1)
TERMINAL_PORTS = {S.REJECTED: "rejected", S.CANCELLED: "timeout", S.FAILED: "error"}


class Next(StrEnum):
    """What the waiting run does with a proposal that has no port yet."""

    FINISH = "finish"  # the proposal answered a port
    RECOVER = "recover"  # a terminal failure the run waits to see retried
    AWAIT_APPROVAL = "await_approval"
    ENQUEUE = "enqueue"  # approved: queue it for delivery, then wait
    SCHEDULE = "schedule"  # queued or failed waiting to retry: make sure a job is due
    WAIT = "wait"  # applying: a worker holds it


@dataclass(frozen=True)
class Answer:
    next: Next
    port: str | None = None
    error_code: str | None = None


def port(d: Delivery) -> str | None:
    """The port a proposal that can no longer change answers (WAIT-1), or None.

    Answered exactly when `states.is_terminal`: applied and compensation_required
    (effective) → ``applied``; rejected → ``rejected``; cancelled → ``timeout``; a
    terminal failure → ``error``.
    """
    if not is_terminal(d.state, d.delivery_terminal):
        return None
    if is_effective(d.state):
        return "applied"
    return TERMINAL_PORTS[d.state]


def error_code(d: Delivery) -> str:
    """The error an ``error`` port carries."""
    return d.last_error_code or DELIVERY_FAILED


def answer(d: Delivery, now: datetime, *, await_recovery: bool = False, timed_out: bool = False) -> Answer:
    """What a run waiting on `d` does now (WAIT-1, PREP-7).

    Args:
        now: the current time; a terminal failure is recoverable only while the
            authorization lasts.
        await_recovery: the node waits for an operator retry of a terminal failure.
        timed_out: the run's wait passed its deadline (no recovery then).

    Returns:
        FINISH with the port (and its error code), RECOVER for a terminal failure
        the run keeps waiting on, or the waiting step for a proposal still open.
    """
    answered = port(d)
    if answered == "error":
        if await_recovery and not timed_out and d.expires_at > now:
            return Answer(Next.RECOVER, error_code=error_code(d))
        return Answer(Next.FINISH, "error", error_code(d))
    if answered is not None:
        return Answer(Next.FINISH, answered)
    if d.state == S.APPROVAL_REQUIRED:
        return Answer(Next.AWAIT_APPROVAL)
    if d.state == S.APPROVED:
        return Answer(Next.ENQUEUE)
    if d.state == S.APPLYING:
        return Answer(Next.WAIT)
    return Answer(Next.SCHEDULE)


def timed_out_port(d: Delivery) -> str:
    """After a timeout: an action applied meanwhile still answers ``applied`` (WAIT-2)."""
    return "applied" if port(d) == "applied" else "timeout"
