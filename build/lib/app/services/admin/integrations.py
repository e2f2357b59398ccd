"""Integrations (the platforms a team serves) and their API tokens: tokens are
issued once, stored hashed, checked per request."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from app.domain.clock import utcnow
from app.domain.digests import sha256_hex
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Integration, IntegrationToken, OperatorUser, Queue
from app.services.admin.input import add_with_unique_slug, clean_name, clean_slug, has_control_characters, plausible_id
from app.services.uow import Actor, unit_of_work

log = logging.getLogger(__name__)

TOKEN_PREFIX = "sct_"
MAX_TOKEN_LABEL = 200
# A token's last use is written at most this often, so most API calls stay read-only.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedToken:
    token_id: str
    token: str  # shown once; only its hash is kept


def issue_token(integration_id: str, *, label: str, actor: Actor, installation_id: str | None = None) -> IssuedToken:
    """Create a bearer token for an integration.

    Args:
        label: what the token is for (up to 200 characters; may be empty).
        installation_id: when given, the integration must belong to it (the
            console passes the admin's installation).

    Returns:
        The token id and the plaintext token, which is never available again.

    Raises:
        ApiError: 404 ``integration_not_found``; 400 ``token_label_invalid``.
    """
    label = label.strip() if isinstance(label, str) else ""
    if len(label) > MAX_TOKEN_LABEL or has_control_characters(label):
        raise ApiError(400, "token_label_invalid", "A label has at most 200 characters on one line.", "label")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with unit_of_work() as uow:
        integration = uow.session.get(Integration, integration_id) if plausible_id(integration_id) else None
        if integration is None or (installation_id is not None and integration.installation_id != installation_id):
            raise ApiError(404, "integration_not_found", "No such integration.")
        row = IntegrationToken(
            installation_id=integration.installation_id,
            integration_id=integration.id,
            label=label,
            token_prefix=token[:12],
            token_hash=sha256_hex(token),
            created_by_id=actor.id,
        )
        uow.session.add(row)
        uow.session.flush()
        uow.audit(
            integration.installation_id,
            f"token-issued:{row.id}",
            "integration.token_issued",
            actor,
            "integration",
            integration.id,
            {"token_id": row.id, "label": row.label, "prefix": row.token_prefix},
        )
        issued = IssuedToken(row.id, token)
        uow.commit()
    return issued


def revoke_token(token_id: str, *, installation_id: str, actor: Actor, integration_id: str | None = None) -> None:
    """Revoke a token; requests with it are refused from now on. Revoking a revoked
    token changes nothing.

    Args:
        integration_id: when given, the token must belong to that integration.

    Raises:
        ApiError: 404 ``token_not_found``.
    """
    with unit_of_work() as uow:
        row = uow.session.get(IntegrationToken, token_id) if plausible_id(token_id) else None
        if (
            row is None
            or row.installation_id != installation_id
            or (integration_id is not None and row.integration_id != integration_id)
        ):
            raise ApiError(404, "token_not_found", "No such token.")
        if row.revoked_at is None:
            row.revoked_at = utcnow()
            uow.audit(
                installation_id,
                f"token-revoked:{row.id}",
                "integration.token_revoked",
                actor,
                "integration",
                row.integration_id,
                {"token_id": row.id},
            )
        uow.commit()


@dataclass(frozen=True)
class Caller:
    """Who called the platform API: the integration and the token it used (FOUR-8)."""

    integration: Integration
    token_id: str
    token_created_at: datetime
    token_standing_since: datetime | None = None  # FOUR-8: creation, or what it succeeds


def authenticate(token: str | None) -> Integration | None:
    """The active integration a bearer token belongs to, or None.

    Records the token's last use, at most once a minute.
    """
    caller = authenticate_caller(token)
    return caller.integration if caller else None


def authenticate_caller(token: str | None) -> Caller | None:
    """`authenticate`, also naming the token (its id, creation time and standing:
    FOUR-8 lets only a token standing since before an action's first attempt report
    its result), or None."""
    if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    row = db.session.scalar(
        select(IntegrationToken).where(
            IntegrationToken.token_hash == sha256_hex(token), IntegrationToken.revoked_at.is_(None)
        )
    )
    if row is None:
        return None
    integration = db.session.get(Integration, row.integration_id)
    if integration is None or not integration.active:
        return None
    now = utcnow()
    token_id, created_at, standing_since = row.id, row.created_at, row.standing_since
    if row.last_used_at is None or row.last_used_at < now - LAST_USED_RESOLUTION:
        integration_id = integration.id
        _touch(row.id, now)
        integration = db.session.get(Integration, integration_id)
    return Caller(integration, token_id, created_at, standing_since)


def _touch(token_id: str, now: datetime) -> None:
    """Record a token's use (one guarded UPDATE; a concurrent request may skip it).

    Bookkeeping only: a failure is logged and the request goes on.
    """
    try:
        _write_last_used(token_id, now)
    except SQLAlchemyError:
        log.warning("could not record the last use of token %s", token_id, exc_info=True)


def _write_last_used(token_id: str, now: datetime) -> None:
    with unit_of_work() as uow:
        uow.session.execute(
            update(IntegrationToken)
            .where(
                IntegrationToken.id == token_id,
                or_(
                    IntegrationToken.last_used_at.is_(None),
                    IntegrationToken.last_used_at < now - LAST_USED_RESOLUTION,
                ),
            )
            .values(last_used_at=now)
            .execution_options(synchronize_session=False)
        )
        uow.commit()


# --- the admin screens -------------------------------------------------------------


@dataclass(frozen=True)
class IntegrationRow:
    """An integration as the admin list shows it."""

    integration: Integration
    queue_name: str | None
    active_tokens: int


@dataclass(frozen=True)
class TokenRow:
    """A token as the admin page shows it: never its plaintext or hash."""

    id: str
    label: str
    token_prefix: str
    created_at: datetime
    created_by: str | None
    revoked_at: datetime | None
    last_used_at: datetime | None


@dataclass(frozen=True)
class IntegrationDetail:
    integration: Integration
    queue_name: str | None
    tokens: list[TokenRow]


def list_queues(installation_id: str) -> list[Queue]:
    """The installation's review queues, by name."""
    return list(db.session.scalars(select(Queue).where(Queue.installation_id == installation_id).order_by(Queue.name)))


def list_integrations(installation_id: str) -> list[IntegrationRow]:
    """The installation's integrations by name, with default queue and live token count."""
    live = (
        select(IntegrationToken.integration_id, func.count().label("n"))
        .where(IntegrationToken.installation_id == installation_id, IntegrationToken.revoked_at.is_(None))
        .group_by(IntegrationToken.integration_id)
        .subquery()
    )
    rows = db.session.execute(
        select(Integration, Queue.name, live.c.n)
        .outerjoin(Queue, Queue.id == Integration.default_queue_id)
        .outerjoin(live, live.c.integration_id == Integration.id)
        .where(Integration.installation_id == installation_id)
        .order_by(Integration.name, Integration.id)
    ).all()
    return [IntegrationRow(integration, queue_name, n or 0) for integration, queue_name, n in rows]


def integration_detail(installation_id: str, integration_id: str) -> IntegrationDetail:
    """One integration of the installation and its tokens, newest first.

    Raises:
        ApiError: 404 ``integration_not_found`` (also for another installation's).
    """
    integration = db.session.get(Integration, integration_id) if plausible_id(integration_id) else None
    if integration is None or integration.installation_id != installation_id:
        raise ApiError(404, "integration_not_found", "No such integration.")
    queue = db.session.get(Queue, integration.default_queue_id) if integration.default_queue_id else None
    names = dict(
        db.session.execute(
            select(OperatorUser.id, OperatorUser.display_name).where(OperatorUser.installation_id == installation_id)
        ).all()
    )
    tokens = [
        TokenRow(
            t.id,
            t.label,
            t.token_prefix,
            t.created_at,
            names.get(t.created_by_id, t.created_by_id),
            t.revoked_at,
            t.last_used_at,
        )
        for t in db.session.scalars(
            select(IntegrationToken)
            .where(
                IntegrationToken.integration_id == integration.id, IntegrationToken.installation_id == installation_id
            )
            .order_by(IntegrationToken.created_at.desc(), IntegrationToken.id)
        )
    ]
    return IntegrationDetail(integration, queue.name if queue else None, tokens)


def create_integration(operator: OperatorUser, *, name: str, slug: str, default_queue_id: str | None) -> str:
    """Create an integration (a platform the team serves) in the operator's installation.

    Args:
        operator: the admin doing it (their installation owns the row).
        name: 1..200 characters. slug: lowercase letters, digits, hyphens (1..100),
            unique in the installation.
        default_queue_id: a queue of the installation, or None/"" for none.

    Returns:
        The new integration's id.

    Raises:
        ApiError: 400 ``name_invalid``, ``slug_invalid``, ``queue_invalid``;
            409 ``slug_taken``.
    """
    installation_id = operator.installation_id
    actor = Actor("operator", operator.id)
    name = clean_name(name)
    slug = clean_slug(slug)
    default_queue_id = default_queue_id or None
    with unit_of_work() as uow:
        if default_queue_id is not None:
            queue = uow.session.get(Queue, default_queue_id) if plausible_id(default_queue_id) else None
            if queue is None or queue.installation_id != installation_id:
                raise ApiError(400, "queue_invalid", "Choose one of this installation's queues.", "default_queue_id")
        integration = Integration(
            installation_id=installation_id, name=name, slug=slug, default_queue_id=default_queue_id, active=True
        )
        add_with_unique_slug(uow.session, integration, "An integration")
        uow.audit(
            installation_id,
            f"admin:integration-created:{integration.id}",
            "admin.integration_created",
            actor,
            "integration",
            integration.id,
            {"name": name, "slug": slug, "default_queue_id": default_queue_id},
        )
        integration_id = integration.id
        uow.commit()
    return integration_id
