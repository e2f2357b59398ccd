"""What a proposal page says first (SPEC QUEUE-6): its state in words, who must act
next and what happens next, before any detail."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.states import is_dead_letter, is_waiting


@dataclass(frozen=True)
class Lead:
    """The summary at the top of a proposal page.

    Attributes:
        tone: ``wait`` (someone or something must act), ``ok`` (done as asked),
            ``bad`` (failed for good or refused), ``info`` (ended otherwise).
        headline: the state in one sentence.
        next_step: what happens next, or who must act.
        action: the action the viewer can take here (``decide``, ``retry``,
            ``retry_now``) or None.
    """

    tone: str
    headline: str
    next_step: str
    action: str | None = None


def proposal_lead(
    state: str,
    delivery_terminal: bool,
    *,
    accepted: bool = False,
    can_decide: bool = False,
    can_retry: bool = False,
    can_retry_now: bool = False,
    approval_counts: bool = True,
    missing: str | None = None,
) -> Lead:
    """The lead of a proposal page (QUEUE-6, POL-1).

    Args:
        state: the proposal's `ProposalState` value.
        delivery_terminal: its ``delivery_terminal`` flag.
        accepted: the platform accepted it and its confirmation is awaited.
        can_decide: the viewer may approve or reject it now (APPR-4).
        can_retry: the viewer may start a new delivery cycle (RTRY-1).
        can_retry_now: the viewer may start the next attempt of the cycle at once.
        approval_counts: the viewer's approval would count for some factor (False when
            what they may give is already met: they may only reject, POL-1).
        missing: what the policy's standing still misses, in words ("1 lead"), or None.

    Returns:
        A `Lead`; its `action` is set only when the viewer can take it.
    """
    if state == "approval_required":
        still = f"Still missing: {missing}." if missing else "A reviewer other than its maker must approve or reject it."
        if can_decide and approval_counts:
            return Lead("wait", "Waiting for your approval.", "Check the evidence and the digest, then approve or reject.", "decide")
        if can_decide:
            return Lead("wait", "Waiting for approval.",
                        f"{still} Your approval would count for nothing (what you may give is met); you may still reject it.",
                        "decide")
        return Lead("wait", "Waiting for approval.", still)
    if state in ("approved", "queued") and not delivery_terminal:
        sent = "Accepted by the platform; waiting for its confirmation." if state == "queued" and accepted else None
        return Lead("wait", sent or "Approved; queued for delivery.", "The console sends it to the platform; this page follows it.")
    if state == "applying":
        return Lead("wait", "Being sent to the platform now.", "This page shows the answer as soon as it arrives.")
    if state == "failed" and is_waiting(state, delivery_terminal):
        return Lead("wait", "Delivery failed; it will be retried.", "The console tries again by itself.",
                    "retry_now" if can_retry_now else None)
    if is_dead_letter(state, delivery_terminal):
        return Lead("bad", "Delivery failed for good.", "Nothing more is sent unless an operator retries it (a new delivery cycle).",
                    "retry" if can_retry else None)
    if state == "applied":
        return Lead("ok", "Applied on the platform.", "Nothing more to do, unless it must be undone.")
    if state == "compensation_required":
        return Lead("wait", "Applied; an undo is proposed.", "Another reviewer must approve the compensating action.")
    if state == "rejected":
        return Lead("info", "Rejected; nothing was sent.", "Nothing more happens.")
    if state == "cancelled":
        return Lead("info", "Cancelled; nothing was sent.", "Nothing more happens.")
    return Lead("info", state.replace("_", " ").capitalize() + ".", "")


def appeal_lead(
    state: str,
    *,
    outcome: str | None = None,
    open_corrections: int = 0,
    can_decide: bool = False,
    refusal: str = "",
) -> Lead:
    """The lead of an appeal page (QUEUE-6).

    Args:
        state: the appeal's state (``open`` or ``decided``).
        outcome: the latest appeal decision's outcome (``upheld``, ``modified``,
            ``reversed``), when decided.
        open_corrections: corrections not yet carried out (pending or proposed).
        can_decide: the viewer may decide the appeal now.
        refusal: why the viewer may not decide it (shown as the next step).

    Returns:
        A `Lead`; its action is ``decide`` only when the viewer can decide.
    """
    if state == "open":
        if can_decide:
            return Lead("wait", "Waiting for your decision.", "Choose an outcome below and give your rationale.", "decide")
        return Lead("wait", "Waiting for a decision.", refusal or "An appeals reviewer decides it.")
    if outcome == "upheld":
        return Lead("ok", "Decided: upheld. The original decision stands.", "Nothing more to do.")
    words = {"modified": "modified", "reversed": "reversed"}.get(outcome or "", "decided")
    if open_corrections:
        many = "corrections wait" if open_corrections > 1 else "correction waits"
        return Lead("wait", f"Decided: {words}. {open_corrections} {many} to be carried out.",
                    "A reviewer other than the appeal's decider approves each correction below.")
    return Lead("ok", f"Decided: {words}. Its corrections are carried out.", "Nothing more to do.")
