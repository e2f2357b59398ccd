"""Dead letters: terminal delivery failures, retried in bulk behind a digest of the
exact list the operator saw (SPEC CONN-4).

Pure functions over plain values; the service (`services/lifecycle/dead_letter_retry.py`)
loads the list, checks it here and starts each proposal's new cycle under RTRY.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.domain.digests import json_digest

# How many dead letters one page lists, and so one bulk retry can start at most.
LIST_LIMIT = 200
LIST_CHANGED = "dead_letters_changed"
NOT_LISTED = "dead_letter_not_listed"
NOTHING_SELECTED = "dead_letters_none_selected"


def list_digest(entries: Iterable[tuple[str, int]]) -> str:
    """The digest of a listed set of dead letters (CONN-4): over each proposal id with
    its delivery cycle, in id order, so a proposal that was retried and failed again
    counts as a change even though its id is the same.

    Args:
        entries: (proposal id, delivery cycle) pairs, in any order.

    Returns:
        ``sha256:<hex>`` of the canonical JSON of the sorted pairs.
    """
    return json_digest(sorted([proposal_id, cycle] for proposal_id, cycle in entries))


def bulk_refusal(
    listed: Sequence[tuple[str, int]], confirmed_digest: str, selected: Sequence[str] | None
) -> tuple[str, str] | None:
    """Why a bulk retry of `selected` (None: every listed one) cannot go ahead, as
    (code, message), or None (CONN-4).

    Args:
        listed: what the filter lists now, as (proposal id, delivery cycle) pairs.
        confirmed_digest: the `list_digest` the operator's page showed.
        selected: the proposal ids the operator ticked, or None for all listed.
    """
    if list_digest(listed) != confirmed_digest:
        return LIST_CHANGED, (
            "The list of failed deliveries changed since the page was shown. "
            "Nothing was retried: reload the page, check the list and try again."
        )
    if selected is not None:
        if not selected:
            return NOTHING_SELECTED, "Tick at least one failed delivery, or retry all listed."
        if set(selected) - {proposal_id for proposal_id, _ in listed}:
            return NOT_LISTED, "A selected action is not in the list shown. Nothing was retried."
    return None
