"""Dead letters: terminal delivery failures, listed by connection and error code and
retried in bulk (SPEC CONN-4).

A bulk retry names the filter the page listed and the digest of exactly what it
listed (`domain.dead_letters.list_digest`). If the list is different now, nothing
happens (409 ``dead_letters_changed``). Otherwise every chosen proposal gets its own
new delivery cycle through the operator retry of RTRY (`retry.start_new_cycle`:
its checks, its guarded write, its own audit row), all in one transaction with one
audit row for the bulk request. The request's idempotency key makes a replay
answer what the first one did, and do nothing again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select

from app.domain import dead_letters as dead_letter_rules
from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.models import (
    ActionProposal,
    AuditEvent,
    ComponentVersion,
    Connection,
    ConnectionVersion,
    OperatorUser,
    predicates,
)
from app.services.lifecycle.retry import RetryConflict, start_new_cycle
from app.services.uow import Actor, unit_of_work

P = ActionProposal
BULK_ACTION = "dead_letters.retry_requested"
NO_CONNECTION = "none"  # the filter value for proposals whose component has no connection
MAX_KEY_LENGTH = 100


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which dead letters a page lists: one connection (``"none"``: without one) and
    one error code, each optional."""

    connection_id: str | None = None
    error_code: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"connection_id": self.connection_id, "error_code": self.error_code}


@dataclass(frozen=True)
class BulkRetryResult:
    """What a bulk retry did: the proposals that got a new cycle, those that could
    not (id -> refusal code; they stay dead letters), and whether this was a replay."""

    retried: list[str]
    refused: dict[str, str] = field(default_factory=dict)
    idempotent_replay: bool = False


def _dead(installation_id: str):
    return (P.installation_id == installation_id, predicates.dead_letter())


def _with_connection(statement):
    return (
        statement.outerjoin(ComponentVersion, ComponentVersion.id == P.component_version_id)
        .outerjoin(ConnectionVersion, ConnectionVersion.id == ComponentVersion.connection_version_id)
        .outerjoin(Connection, Connection.id == ConnectionVersion.connection_id)
    )


def listed_statement(installation_id: str, where: DeadLetterFilter, *columns):
    """The SELECT of the dead letters a filter lists: oldest failure first, at most
    `dead_letter_rules.LIST_LIMIT`, with `columns` (default: the proposal, its connection's id
    and name)."""
    statement = _with_connection(select(*(columns or (P, Connection.id, Connection.name)))).where(
        *_dead(installation_id)
    )
    if where.connection_id == NO_CONNECTION:
        statement = statement.where(Connection.id.is_(None))
    elif where.connection_id:
        statement = statement.where(Connection.id == where.connection_id)
    if where.error_code:
        statement = statement.where(P.last_error_code == where.error_code)
    return statement.order_by(P.updated_at, P.id).limit(dead_letter_rules.LIST_LIMIT)


def count_matching(session, installation_id: str, where: DeadLetterFilter) -> int:
    """How many dead letters match the filter (the list shows at most LIST_LIMIT)."""
    inner = listed_statement(installation_id, where, P.id).limit(None).order_by(None).subquery()
    return session.scalar(select(func.count()).select_from(inner)) or 0


def groups_statement(installation_id: str):
    """Dead letters counted by connection and error code (CONN-4)."""
    return (
        _with_connection(
            select(Connection.id, Connection.name, P.last_error_code, func.count(), func.min(P.updated_at))
        )
        .where(*_dead(installation_id))
        .group_by(Connection.id, Connection.name, P.last_error_code)
    )


def retry_dead_letters(
    operator: OperatorUser,
    *,
    where: DeadLetterFilter,
    list_digest: str,
    idempotency_key: str,
    proposal_ids: list[str] | None = None,
) -> BulkRetryResult:
    """Retry listed dead letters in one step (CONN-4, RTRY-1..3).

    Args:
        operator: who asks (a reviewer or an admin).
        where: the filter the page listed.
        list_digest: the digest the page showed of what it listed.
        idempotency_key: 1..100 characters, one per bulk request of this operator.
        proposal_ids: the ticked proposals; None retries every listed one.

    Returns:
        The proposals given a new cycle and those refused by RTRY (id -> code:
        ``action_approval_expired``, ``action_precondition_changed``, ...); a replay
        answers the first request's result and changes nothing.

    Raises:
        ApiError: 400 ``idempotency_key_invalid``, ``dead_letters_none_selected``,
            ``dead_letter_not_listed``; 409 ``dead_letters_changed`` (the list is not
            the one confirmed: nothing was retried), ``idempotency_key_reused``.
    """
    if not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
        raise ApiError(400, "idempotency_key_invalid", "An idempotency key of 1 to 100 characters is required.")
    selected = None if proposal_ids is None else sorted(set(proposal_ids))
    if selected is not None and len(selected) > dead_letter_rules.LIST_LIMIT:
        raise ApiError(400, dead_letter_rules.NOT_LISTED, f"At most {dead_letter_rules.LIST_LIMIT} actions can be retried in one step.")
    key = f"dead-letter-retry:{idempotency_key}"
    request = {**where.as_dict(), "list_digest": list_digest, "selected": selected}
    try:
        return _retry(operator, where, request, key, idempotency_key, selected)
    except ApiError as error:
        if error.code != dead_letter_rules.LIST_CHANGED:
            raise
        # The same request sent twice at once: the other one retried the list.
        with unit_of_work() as uow:
            replay = _replay(uow.session, key, operator, request)
        if replay is None:
            raise
        return replay


def _retry(operator, where, request, key, idempotency_key, selected) -> BulkRetryResult:
    with unit_of_work() as uow:
        session = uow.session
        replay = _replay(session, key, operator, request)
        if replay is not None:
            return replay
        # PostgreSQL: lock what is listed, so no guarded write below can miss.
        rows = session.scalars(listed_statement(operator.installation_id, where, P).with_for_update(of=P)).all()
        refusal = dead_letter_rules.bulk_refusal([(p.id, p.delivery_cycle) for p in rows], request["list_digest"], selected)
        if refusal is not None:
            code, message = refusal
            raise ApiError(409 if code == dead_letter_rules.LIST_CHANGED else 400, code, message)
        chosen = set(selected) if selected is not None else {p.id for p in rows}
        now = utcnow()
        retried, refused = [], {}
        for proposal in rows:
            if proposal.id not in chosen:
                continue
            try:
                with uow.savepoint():
                    start_new_cycle(
                        uow,
                        proposal,
                        payload_digest=proposal.payload_digest,
                        key=f"action-retry:{idempotency_key}:{proposal.id}",
                        operator=operator,
                        now=now,
                    )
            except RetryConflict as error:
                raise _changed() from error
            except ApiError as error:  # RTRY refuses this one; it stays a dead letter
                refused[proposal.id] = error.code
            else:
                retried.append(proposal.id)
        uow.audit(
            operator.installation_id,
            key,
            BULK_ACTION,
            Actor("operator", operator.id),
            "dead_letters",
            request["list_digest"],
            {**request, "retried": retried, "refused": refused},
        )
        uow.commit()
    return BulkRetryResult(retried, refused)


def _changed() -> ApiError:
    code, message = (
        dead_letter_rules.LIST_CHANGED,
        (
            "The list of failed deliveries changed while it was being retried. "
            "Nothing was retried: reload the page and try again."
        ),
    )
    return ApiError(409, code, message)


def _replay(session, key: str, operator: OperatorUser, request: dict) -> BulkRetryResult | None:
    """The first result of this bulk request, or None when it is new (RTRY-3)."""
    prior = session.scalar(select(AuditEvent).where(AuditEvent.idempotency_key == key))
    if prior is None:
        return None
    details = prior.details
    same = prior.actor_id == operator.id and all(details.get(name) == value for name, value in request.items())
    if not same:
        raise ApiError(409, "idempotency_key_reused", "This idempotency key was already used for another retry.")
    return BulkRetryResult(details["retried"], details["refused"], idempotent_replay=True)
