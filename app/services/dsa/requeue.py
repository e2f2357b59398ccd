"""Sending a dead-lettered statement of reasons again (SPEC §7 DSA-3).

A statement the Transparency Database refused for its own errors stays a dead
letter with those errors until an admin requeues it: one guarded move
(`StatementMove.REQUEUE`, dead letter -> pending), audited
(``dsa.statement_requeued``, with the error it had), answered again for the same
idempotency key. The statement is sent again as it was built: requeuing does not
rebuild it, so it is worth doing once the cause is corrected where it lies (for
example, the database accepts the value it refused, or its account for the platform
was set up); a statement wrong in itself is refused again.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.dsa_answers import StatementMove
from app.domain.errors import ApiError
from app.models import AuditEvent, DsaStatement, OperatorUser
from app.models.dsa import move_statements
from app.services.uow import Actor, unit_of_work

ACTION = "dsa.statement_requeued"
NOT_DEAD_LETTER = "dsa_statement_not_dead_letter"
MAX_KEY_LENGTH = 100


@dataclass(frozen=True)
class RequeueResult:
    """A requeued statement: its id and puid, and whether this was a replay of the
    same request (nothing done again)."""

    statement_id: str
    puid: str
    idempotent_replay: bool = False


def requeue_statement(operator: OperatorUser, statement_id: str, idempotency_key: str) -> RequeueResult:
    """Requeue one dead-lettered statement of `operator`'s installation (DSA-3).

    Args:
        operator: an admin (the view checks the role).
        statement_id: the statement's id (``sor_...``).
        idempotency_key: 1..100 characters, one per request (a page's rows may
            share one: the key is taken per statement).

    Returns:
        The `RequeueResult`; a replay of the same key answers the first result.

    Raises:
        ApiError: 404 ``dsa_statement_not_found`` (also another installation's);
            400 ``idempotency_key_invalid``;
            409 ``dsa_statement_not_dead_letter`` (pending or submitted already),
            ``idempotency_key_reused`` (another operator used the key).
            A refused request changes nothing.
    """
    try:
        return _requeue(operator, statement_id, idempotency_key)
    except ApiError as error:
        if error.code != NOT_DEAD_LETTER:
            raise
        # The same request twice at once (a double click): the other one requeued it.
        with unit_of_work() as uow:
            prior = uow.session.scalar(
                select(AuditEvent).where(AuditEvent.idempotency_key == _key(str(statement_id)[:200], idempotency_key))
            )
            if prior is None:
                raise
            return _replay(prior, operator, prior.target_id)


def _key(statement_id: str, idempotency_key: str) -> str:
    return f"dsa-requeue:{statement_id}:{idempotency_key}"


def _requeue(operator: OperatorUser, statement_id: str, idempotency_key: str) -> RequeueResult:
    with unit_of_work() as uow:
        session = uow.session
        statement = session.scalar(
            select(DsaStatement).where(
                DsaStatement.id == str(statement_id)[:200], DsaStatement.installation_id == operator.installation_id
            )
        )
        if statement is None:
            raise ApiError(404, "dsa_statement_not_found", "No statement of reasons has this id.")
        if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
            raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 100 characters is required.")
        key = _key(statement.id, idempotency_key)
        prior = session.scalar(select(AuditEvent).where(AuditEvent.idempotency_key == key))
        if prior is not None:
            return _replay(prior, operator, statement.id)
        error = statement.last_error
        if not move_statements(session, [statement.id], StatementMove.REQUEUE, values={"last_error": None}):
            raise ApiError(
                409,
                NOT_DEAD_LETTER,
                "This statement is not refused (any more): it is waiting to be sent or already in the "
                "Transparency Database. Nothing was changed.",
            )
        uow.audit(
            operator.installation_id,
            key,
            ACTION,
            Actor("operator", operator.id),
            "dsa_statement",
            statement.id,
            {"puid": statement.puid, "proposal_id": statement.proposal_id, "error": error,
             "attempts": statement.attempts},
        )  # fmt: skip
        uow.commit()
        return RequeueResult(statement.id, statement.puid)


def _replay(prior: AuditEvent, operator: OperatorUser, statement_id: str) -> RequeueResult:
    """The first result of this request, or a refusal when the key meant another one."""
    if prior.actor_id != operator.id or prior.target_id != statement_id:
        raise ApiError(409, "idempotency_key_reused", "This idempotency key was already used for another request.")
    return RequeueResult(statement_id, prior.details.get("puid", ""), idempotent_replay=True)
