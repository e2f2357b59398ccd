"""What a retired component version still does (SPEC FOUR-7, FOUR-5, PREP-3).

Retiring a version stops NEW preparation only: a workflow action node, a compensation
or an appeal correction cannot choose it afresh. Every proposal already prepared with
it keeps it, since its approval is bound to that version and its delivery (FOUR-5):
its delivery and every retry (a new delivery cycle), a replay of the node that made it,
the scheduled reversal and the "end now"/"extend" proposals of a temporary action made
with it, and follow-ups (compensation, appeal correction) that use the version of the
action they follow. Pure functions over plain values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.states import ProposalState, is_dead_letter, is_effective, is_terminal

S = ProposalState


def prepared_versions(component_version_id: str | None, temporary: dict[str, Any] | None) -> tuple[str, ...]:
    """The component versions an existing proposal was prepared with: its own and, for
    a temporary action, its reversal's (whose digest covered it, TEMP-1).

    Args:
        component_version_id: the proposal's component version (None: none).
        temporary: its ``temporary`` plan, or None for a permanent action.
    """
    reversal = ((temporary or {}).get("reversal") or {}).get("component_version_id")
    return tuple(v for v in (component_version_id, reversal) if isinstance(v, str) and v)


def may_use_retired_version(version_id: str, prepared_with: Iterable[str]) -> bool:
    """May a proposal use a retired component version (FOUR-7)? Only when it was prepared
    with it before or follows an existing proposal prepared with it: `prepared_with` are
    the versions of that proposal (see `prepared_versions`); empty for new preparation,
    which a retired version refuses (``action_component_unavailable``, PREP-3).

    Args:
        version_id: the retired version asked for.
        prepared_with: the versions the proposal, or the one it follows, was prepared with.
    """
    return version_id in set(prepared_with)


@dataclass(frozen=True)
class VersionUse:
    """One proposal as retirement looks at it: its state and delivery, its version,
    its temporary plan and the action it reverses (None: not a reversal)."""

    id: str
    state: str
    delivery_terminal: bool
    expires_at: datetime
    component_version_id: str
    temporary: dict[str, Any] | None
    reverses_proposal_id: str | None


def version_users(version_id: str, proposals: Iterable[VersionUse], now: datetime) -> int:
    """How many actions still need a component version (FOUR-7), as the retirement page
    shows: open proposals prepared with it; those failed for good whose authorization
    has not expired (an operator may retry them); and temporary actions not ended
    (open, or in force with no applied reversal) whose reversal uses it, since their
    reversal, its retry or an "end now" will. A temporary action and its reversals
    count once; a failed reversal of an action already ended counts nothing.

    Args:
        version_id: the component version.
        proposals: every proposal that uses the version or is temporary.
        now: the decision time (UTC), for expiry.

    Returns:
        The number of actions (0: retiring strands nothing).
    """
    rows = list(proposals)
    ended = {p.reverses_proposal_id for p in rows if p.reverses_proposal_id and p.state == S.APPLIED}
    needing: set[str] = set()
    for p in rows:
        failed_for_good = is_dead_letter(p.state, p.delivery_terminal)
        open_ = not is_terminal(p.state, p.delivery_terminal)
        if p.component_version_id == version_id and p.reverses_proposal_id not in ended:
            if open_ or (failed_for_good and p.expires_at > now):
                needing.add(p.reverses_proposal_id or p.id)
        in_force = open_ or is_effective(p.state)
        if p.temporary and p.id not in ended and in_force and version_id in prepared_versions(None, p.temporary):
            needing.add(p.id)
    return len(needing)
