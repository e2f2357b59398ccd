"""What an applied receipt means for the DSA (SPEC §7 DSA-2, DSA-4): called in the
transaction that records it (`receipt_intake`, the one place applied is written)."""

from __future__ import annotations

from app.models import ActionProposal
from app.services.uow import UnitOfWork

from .notices import send_notice
from .settings import current_settings
from .statements import record_statement


def on_applied(uow: UnitOfWork, proposal: ActionProposal) -> None:
    """Build the restriction's statement of reasons (DSA-2) and queue the affected
    user's notice under the same approval (DSA-4), when the installation has DSA on
    and the action's component declares a restriction. Nothing otherwise."""
    settings = current_settings(uow.session, proposal.installation_id)
    if not settings.enabled:
        return
    statement = record_statement(uow, proposal, settings)
    if statement is not None:
        send_notice(uow, proposal, statement, settings)
