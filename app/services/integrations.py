"""Integration API tokens: issued once, stored hashed, checked per request."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.digests import sha256_hex
from app.domain.errors import ApiError
from app.models import Integration, IntegrationToken

from .uow import Actor, unit_of_work

TOKEN_PREFIX = "sct_"


@dataclass(frozen=True)
class IssuedToken:
    token_id: str
    token: str  # shown once; only its hash is kept


def issue_token(integration_id: str, *, label: str, actor: Actor) -> IssuedToken:
    """Create a bearer token for an integration.

    Raises:
        ApiError: 404 ``integration_not_found``.
    """
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with unit_of_work() as uow:
        integration = uow.session.get(Integration, integration_id)
        if integration is None:
            raise ApiError(404, "integration_not_found", "No such integration.")
        row = IntegrationToken(
            installation_id=integration.installation_id,
            integration_id=integration.id,
            label=(label or "")[:200],
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


def revoke_token(token_id: str, *, installation_id: str, actor: Actor) -> None:
    """Revoke a token; requests with it are refused from now on.

    Raises:
        ApiError: 404 ``token_not_found``.
    """
    with unit_of_work() as uow:
        row = uow.session.get(IntegrationToken, token_id)
        if row is None or row.installation_id != installation_id:
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


def authenticate(token: str | None) -> Integration | None:
    """The active integration a bearer token belongs to, or None."""
    from app.extensions import db

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
    return integration if integration is not None and integration.active else None
