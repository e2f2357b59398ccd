"""Whether an action can be undone, in words for the approval panel (SPEC POL-5).

A component version declares it (`ComponentVersion.irreversible`: no compensation
exists). What a reviewer is asked to approve must say so before anyone approves.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.extensions import db
from app.models import ActionProposal, ComponentVersion


@dataclass(frozen=True)
class IrreversibleNote:
    """The panel's words for an irreversible action (POL-5)."""

    headline: str = "This action cannot be undone."
    why: str = (
        "Its component declares no compensation: once the platform applies it, nothing in the console can"
        " reverse it. Approve only if you are sure."
    )


def irreversible_note(proposal: ActionProposal) -> IrreversibleNote | None:
    """The words to show for `proposal` when its component version is irreversible,
    else None (POL-5)."""
    version = db.session.get(ComponentVersion, proposal.component_version_id)
    return IrreversibleNote() if version is not None and version.irreversible else None
