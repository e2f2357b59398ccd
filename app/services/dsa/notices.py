"""The affected user's notice (DSA Art. 17), delivered as a `notify_user` action
(SPEC §7 DSA-4)."""

from __future__ import annotations

from app.domain.dsa_settings import DsaSettings
from app.models import ActionProposal, DsaStatement
from app.services.uow import UnitOfWork


def send_notice(uow: UnitOfWork, proposal: ActionProposal, statement: DsaStatement, settings: DsaSettings) -> None:
    """Queue the notice of `statement` once, under the restriction's approval (DSA-4)."""
    return None  # built by issue 28's notice lane
