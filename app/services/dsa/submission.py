"""Sending statements of reasons to the DSA Transparency Database (SPEC §7 DSA-3).

`submit_pending` sends an installation's pending statements in batches of at most
100 (the batch endpoint's limit), each request taking its slot in the connection's
shared rate limit first (CONN-2, `rate_limit.take_slot`; the database allows 200
requests a second per user and answers 429 beyond). Per batch:

1. claim: one guarded UPDATE gives up to 100 pending statements this run's claim
   token and a lease, and commits; a statement held by another submitter's live
   claim is not taken, so no two submitters send it at once;
2. send: ``POST {base_url}/statements`` through egress (`app.egress.send`: the
   allowed host, no redirects, the size cap), no transaction held;
3. record, in one unit of work, what the answer means
   (`app.domain.dsa_answers.read_batch_answer`): created or already there
   (``existing_puids``) -> submitted; its own ``statement_N`` errors -> dead letter
   with the error; the rest released to be sent again at once; on 429, 5xx, a wrong
   token or no answer, all released and the run stops with the wait to keep.

Each outcome is written by `move_statements` guarded on the claim, so a statement is
recorded once; a statement sent twice (its answer lost, its lease run out) is
refused the second time as an existing puid and counted as submitted, never created
twice. The puid derives from the proposal (`app.domain.dsa.puid_for`).

Where: `app.services.dsa.connection.endpoint_status` builds the `TdbEndpoint` from
the connection the DSA settings name (its newest version: base URL, sealed token,
timeout, rate limit, allowed hosts); the sweep (`app.services.dsa.sweep`) calls
`submit_pending` for each installation with DSA on and such a connection.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from flask import current_app
from sqlalchemy import and_, or_, select, update

from app import egress
from app.domain.clock import utcnow
from app.domain.digests import canonical_json
from app.domain.dsa import BATCH_MAX, RATE_LIMIT_PER_SECOND
from app.domain.dsa_answers import BatchVerdict, StatementMove, StatementState, read_batch_answer
from app.extensions import db
from app.models import DsaStatement, new_id
from app.models.dsa import move_statements
from app.services.lifecycle import rate_limit
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)
LEASE_SECONDS = 120  # a claim outlives the request's timeout


@dataclass(frozen=True)
class TdbEndpoint:
    """Where and how to submit (`app.services.dsa.connection.endpoint_status`).

    Attributes:
        base_url: the API's base, e.g. ``https://transparency.dsa.ec.europa.eu/api/v1``.
        token: the platform's API token (sent as ``Authorization: Bearer``).
        rate_limit_per_second: requests a second to stay under (the database allows
            200 per user: keep a margin); None for no limit.
        timeout_seconds: one request's whole time.
        limiter_key: the shared rate-limit bucket; by default one per token, as the
            database counts requests per user.
        allowed_hosts: the hosts egress may send to (SEC-2: the connection's);
            None: the base URL's host only.
    """

    base_url: str
    token: str
    rate_limit_per_second: float | None = RATE_LIMIT_PER_SECOND / 2
    timeout_seconds: float = 30.0
    limiter_key: str | None = None
    allowed_hosts: tuple[str, ...] | None = None

    @property
    def bucket(self) -> str:
        """The rate-limit bucket every submitter with this token shares (CONN-2)."""
        return self.limiter_key or "tdb:" + hashlib.sha256(self.token.encode()).hexdigest()[:24]


@dataclass
class SubmissionRun:
    """What one run did.

    Attributes:
        batches: requests sent.
        submitted: statements recorded as submitted (created now or already there).
        dead_lettered: statements refused for their own errors.
        retry_after: seconds to wait before the next run, when it stopped early.
        error: why it stopped early (``tdb_rate_limited``, ``tdb_unavailable``, ...).
    """

    batches: int = 0
    submitted: int = 0
    dead_lettered: int = 0
    retry_after: float | None = None
    error: str | None = None
    answers: list[int | None] = field(default_factory=list)


def submit_pending(
    installation_id: str, endpoint: TdbEndpoint, *, max_batches: int = 1000, batch_size: int = BATCH_MAX
) -> SubmissionRun:
    """Send `installation_id`'s pending statements until none is left or the
    database asks to wait (DSA-3).

    Args:
        installation_id: whose statements.
        endpoint: base URL, token and rate limit of the Transparency Database.
        max_batches: at most this many requests in this run.
        batch_size: statements per request (at most `BATCH_MAX`, 100).

    Returns:
        The `SubmissionRun`; ``retry_after`` set when the caller should run again
        later (429, 5xx, no answer, a wrong token, the rate limit's slot too far,
        or egress refused to send: ``error`` is then its code, e.g.
        ``egress_host_not_allowed``, and nothing was sent or counted as an attempt).
    """
    run = SubmissionRun()
    while run.batches < max_batches:
        token, batch = _claim(installation_id, max(1, min(batch_size, BATCH_MAX)))
        if not batch:
            break
        slot = rate_limit.take_slot(endpoint.bucket, endpoint.rate_limit_per_second)
        if not slot.taken:
            _release(token)
            run.retry_after, run.error = slot.wait_seconds, "tdb_rate_limited"
            break
        if slot.wait_seconds > 0:
            time.sleep(min(slot.wait_seconds, rate_limit.MAX_RATE_WAIT_SECONDS))
        puids = [row.puid for row in batch]
        status, body, retry_after, refused = _send(endpoint, [row.statement for row in batch])
        if refused is not None:  # egress sent nothing (SEC-2): a host not allowed, a bad URL
            _release(token, error=refused)
            run.retry_after, run.error = retry_after, refused
            break
        run.batches += 1
        run.answers.append(status)
        verdict = read_batch_answer(puids, status, body, retry_after)
        _record(installation_id, token, batch, verdict, run)
        if verdict.retry_after is not None:
            run.retry_after, run.error = verdict.retry_after, verdict.error
            break
    return run


def _claim(installation_id: str, size: int) -> tuple[str, list[DsaStatement]]:
    """Claim up to `size` pending statements, oldest first (one guarded UPDATE)."""
    token = new_id("tdbclaim")
    now = utcnow()
    claimable = and_(
        DsaStatement.installation_id == installation_id,
        DsaStatement.state == StatementState.PENDING.value,
        or_(DsaStatement.claimed_until.is_(None), DsaStatement.claimed_until < now),
    )
    with unit_of_work() as uow:
        oldest = select(DsaStatement.id).where(claimable).order_by(DsaStatement.created_at, DsaStatement.id)
        ids = list(uow.session.scalars(oldest.limit(size)))
        if not ids:
            return token, []
        claimed = uow.session.scalars(
            update(DsaStatement)
            .where(DsaStatement.id.in_(ids), claimable)
            .values(claim_token=token, claimed_until=now + timedelta(seconds=LEASE_SECONDS))
            .returning(DsaStatement.id)
            .execution_options(synchronize_session=False)
        ).all()
        uow.commit()
    rows = db.session.scalars(
        select(DsaStatement)
        .where(DsaStatement.id.in_(claimed), DsaStatement.claim_token == token)
        .order_by(DsaStatement.created_at, DsaStatement.id)
    ).all()
    db.session.rollback()
    return token, list(rows)


def _release(token: str, *, error: str | None = None, attempted: bool = False) -> None:
    with unit_of_work() as uow:
        _release_in(uow.session, token, error=error, attempted=attempted)
        uow.commit()


def _release_in(session, token: str, *, error: str | None, attempted: bool) -> None:
    """Give back what `token` still holds (sent again by the next claim)."""
    values: dict = {"claim_token": None, "claimed_until": None}
    if attempted:
        values["attempts"] = DsaStatement.attempts + 1
    if error is not None:
        values["last_error"] = error
    statement = update(DsaStatement).where(DsaStatement.claim_token == token).values(values)
    session.execute(statement.execution_options(synchronize_session=False))


def _send(endpoint: TdbEndpoint, statements: list[dict]) -> tuple[int | None, bytes | None, float, str | None]:
    """POST one batch; (status, body, Retry-After seconds, refusal); status None: no
    answer; refusal: egress's code when it refused to send (nothing left)."""
    url = endpoint.base_url.rstrip("/") + "/statements"
    request = egress.EgressRequest(
        method="POST",
        url=url,
        body=canonical_json({"statements": statements}).encode("utf-8"),
        message_id=new_id("tdb"),
        idempotency_key=new_id("tdb"),
        timeout_seconds=endpoint.timeout_seconds,
        bearer_token=endpoint.token,
    )
    policy = egress.EgressPolicy(
        allowed_hosts=(
            endpoint.allowed_hosts if endpoint.allowed_hosts is not None else ((urlsplit(url).hostname or "").lower(),)
        ),
        allow_private=current_app.config["EGRESS_ALLOW_PRIVATE"],
        max_response_bytes=current_app.config["EGRESS_MAX_RESPONSE_BYTES"],
    )
    try:
        response = egress.send(request, policy)
    except egress.EgressError as error:
        log.info("transparency database answered %s (%s)", error.status, error.code)
        refused = error.code if error.response_class == "refused" and not error.sent else None
        return error.status, error.body, error.delay_seconds, refused
    return response.status, response.body, 0.0, None


def _record(installation_id: str, token: str, batch: list[DsaStatement], verdict: BatchVerdict, run: SubmissionRun):
    """Write what the answer means, guarded on the claim (DSA-3)."""
    by_puid = {row.puid: row for row in batch}
    now = utcnow()
    with unit_of_work() as uow:
        session = uow.session
        submitted = 0
        for puid, created_uuid in verdict.created.items():
            moved = move_statements(
                session,
                [by_puid[puid].id],
                StatementMove.SUBMIT,
                claim_token=token,
                values={"submitted_at": now, "tdb_uuid": created_uuid, "attempts": DsaStatement.attempts + 1,
                        "last_error": None},
            )  # fmt: skip
            submitted += len(moved)
        existing = [by_puid[puid].id for puid in verdict.existing]
        submitted += len(
            move_statements(
                session,
                existing,
                StatementMove.SUBMIT,
                claim_token=token,
                values={"submitted_at": now, "attempts": DsaStatement.attempts + 1, "last_error": "tdb_existing_puid"},
            )
        )
        dead = 0
        for puid, errors in verdict.refused.items():
            dead += len(
                move_statements(
                    session,
                    [by_puid[puid].id],
                    StatementMove.DEAD_LETTER,
                    claim_token=token,
                    values={"attempts": DsaStatement.attempts + 1, "last_error": canonical_json(errors)},
                )
            )
        _release_in(session, token, error=verdict.error, attempted=True)
        uow.audit(
            installation_id,
            f"dsa-batch:{token}",
            "dsa.batch_answered",
            Actor.system("dsa-submitter"),
            "dsa_batch",
            token,
            {
                "sent": len(batch),
                "submitted": submitted,
                "existing": len(existing),
                "dead_lettered": dead,
                "resend": len(verdict.resend),
                "error": verdict.error,
            },
        )
        uow.commit()
    run.submitted += submitted
    run.dead_lettered += dead
