"""Who may report a result through the async result API, and which refused results
are a platform contradicting itself (SPEC FOUR-8, API-4, RCPT-3).

Pure functions over plain values; `app.services.lifecycle.receipt_intake` asks them.
"""

from __future__ import annotations

from datetime import datetime

from app.domain.states import EFFECTIVE_STATES, ProposalState, is_effective

from .delivery import Delivery

S = ProposalState
TOKEN_TOO_NEW = "result_token_too_new"
OUTCOMES = frozenset({S.FAILED}) | EFFECTIVE_STATES


def token_refusal(token_standing_since: datetime | None, first_attempt_at: datetime | None) -> str | None:
    """Whether a bearer token may speak for an action's result (FOUR-8), or its refusal.

    A token standing only since after the action's first attempt ever (any delivery
    cycle) cannot confirm or fail it: whoever could only mint a token later (one
    admin) did not receive the request the platform answers, so its word about it is
    refused. A token's standing is its creation, or, when a second admin approved it
    as the successor of tokens of the same integration (a rotation), the earliest
    standing of those: a rotation does not strand the actions already sent.

    The two times come from two hosts' clocks (the console's, which created the
    token or its predecessor, and the worker's, which started the attempt), compared
    without a tolerance: a tolerance would let a token minted just after a send
    speak for it, which is what this rule forbids; a legitimate token (or the one
    it succeeds) normally stands long before the sends it confirms, so a skew of
    seconds (the hosts keep NTP time) only matters for a token minted seconds
    around a send, and then errs as the clocks err.

    Args:
        token_standing_since: the standing of the token that authenticated the call
            (None when unknown: a caller that does not name its token, as the
            services' own tests do, is not refused here).
        first_attempt_at: when the first attempt of the action was started (None
            when nothing was ever sent: the late-result rules refuse that).

    Returns:
        None when the token may speak; ``result_token_too_new`` otherwise.
    """
    if token_standing_since is None or first_attempt_at is None:
        return None
    return TOKEN_TOO_NEW if token_standing_since > first_attempt_at else None


def contradicts(d: Delivery, status: str) -> bool:
    """Whether a result the API refuses contradicts the outcome already recorded
    (API-4): the proposal ended ``applied`` (or awaits compensation after applying)
    and the platform now says ``failed``, or it failed for good and the platform now
    says ``applied``. The state stays as it is; the claim is recorded and shown.

    Args:
        d: the proposal as read.
        status: the status the platform claims now (``applied`` or ``failed``).
    """
    if d.state not in OUTCOMES or not d.terminal:
        return False
    ended_as = S.APPLIED if is_effective(d.state) else S.FAILED
    return status != ended_as
