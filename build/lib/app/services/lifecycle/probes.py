"""The half-open breaker's probe job (OPS-7, CONN-1), apart from `connection_recovery`
so that the breaker's own modules never import the delivery they wake (no import circle):
this module sits above both.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select, update

from app.domain.clock import utcnow
from app.models import ActionProposal
from app.services.lifecycle import breaker
from app.services.lifecycle.connection_recovery import probe_due, waiting_for
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work

log = logging.getLogger(__name__)
P = ActionProposal


def probe_when_due(connection_id: str, now: datetime | None = None):
    """The probe job (OPS-7, CONN-1): when the connection's probe is due, make its
    longest-waiting delivery due now and deliver it; that delivery's claim takes the
    probe (one guarded write), and its success closes the breaker and wakes the rest.

    Safe to run twice or early: before the probe time, while a probe is in flight,
    or once the breaker closed it sends nothing.

    Args:
        connection_id: the connection whose breaker opened.
        now: the time to judge by (UTC); defaults to now.

    Returns:
        The probe delivery's `DeliveryOutcome`, or None when no probe was due or no
        delivery waits.
    """
    now = now or utcnow()
    with unit_of_work() as uow:
        if not probe_due(breaker.load(uow.session, connection_id), now):
            return None
        row = uow.session.execute(
            select(P.id, P.next_attempt_at)
            .where(*waiting_for(connection_id, now))
            .order_by(P.next_attempt_at, P.id)
            .limit(1)
        ).first()
        if row is None:
            return None
        if row.next_attempt_at > now:  # guarded on the row as read: a claim meanwhile wins
            uow.session.execute(
                update(P)
                .where(P.id == row.id, P.next_attempt_at == row.next_attempt_at)
                .values(next_attempt_at=now)
                .execution_options(synchronize_session=False)
            )
        uow.commit()
    log.info("connection %s: probe due, delivering %s", connection_id, row.id, extra={"connection_id": connection_id})
    return deliver(row.id)
