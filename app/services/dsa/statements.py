"""Statements of reasons built from the console's records (SPEC §7 DSA-2)."""

from __future__ import annotations

from app.domain.dsa_settings import DsaSettings
from app.models import ActionProposal, DsaStatement
from app.services.uow import UnitOfWork


def record_statement(uow: UnitOfWork, proposal: ActionProposal, settings: DsaSettings) -> DsaStatement | None:
    """The statement of reasons of an applied restriction, written once (DSA-2).

    Returns:
        The new (or existing) row; None when the proposal restricts nothing.
    """
    return None  # built by issue 28's statement lane
