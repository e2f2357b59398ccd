"""Integration tokens as configuration changes (SPEC FOUR-4): a token is who may speak
for a platform, so issuing one from the console or the CLI is a pending change that a
second admin approves bound to its digest.

The token is generated when it is proposed and shown to the proposer on that answer
only (as a generated signing secret is). Only its SHA-256 is kept, in the change's
content (so the digest binds it); the token row, the only thing requests are
checked against, is written when the change is approved. Before that the token
authenticates nothing; a rejected change leaves nothing behind.

A token may succeed tokens of the same integration (a rotation, FOUR-8): named in the
change, shown to the approving admin, and, once approved, the new token stands since
the earliest standing of those, so it may report the results of actions sent before.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import select

from app.domain.clock import iso, utcnow
from app.domain.config_changes import ChangeKind
from app.domain.digests import sha256_hex
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Installation, Integration, IntegrationToken, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import has_control_characters, plausible_id
from app.services.admin.integrations import MAX_TOKEN_LABEL, TOKEN_PREFIX
from app.services.uow import UnitOfWork, unit_of_work

MAX_SUCCEEDS = 20
SUCCEEDS_INVALID = "token_succeeds_invalid"


def _integration(session, installation_id: str, integration_id: Any) -> Integration:
    integration = session.get(Integration, integration_id) if plausible_id(integration_id) else None
    if integration is None or integration.installation_id != installation_id:
        raise ApiError(404, "integration_not_found", "No such integration.")
    return integration


def _succeeded(session, integration: Integration, token_ids: Any) -> list[IntegrationToken]:
    """The tokens a new token of `integration` succeeds (FOUR-8), oldest first: active
    or revoked tokens of that same integration, named once each.

    Raises:
        ApiError: 400 ``token_succeeds_invalid`` (not a list of token ids, more than
            20, a repeat, or a token that is not this integration's).
    """
    invalid = ApiError(
        400, SUCCEEDS_INVALID, "A token can succeed only tokens of the same integration, each named once.", "succeeds"
    )
    if not isinstance(token_ids, list) or len(token_ids) > MAX_SUCCEEDS:
        raise invalid
    if len(set(map(str, token_ids))) != len(token_ids):
        raise invalid
    rows = []
    for token_id in token_ids:
        row = session.get(IntegrationToken, token_id) if plausible_id(token_id) else None
        if row is None or row.integration_id != integration.id or row.installation_id != integration.installation_id:
            raise invalid
        rows.append(row)
    return sorted(rows, key=lambda row: (row.created_at, row.id))


def _describe(row: IntegrationToken) -> str:
    """One succeeded token for the diff (ASCII of our own: FOUR-10 flags anything else)."""
    revoked = ", revoked" if row.revoked_at else ""
    return f"token {row.label or '(no label)'} (prefix {row.token_prefix}, created {iso(row.created_at)}{revoked})"


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    integration = _integration(session, installation_id, content["integration_id"])
    current = {"integration": f"{integration.name} ({integration.slug})"}
    if content.get("succeeds"):
        rows = _succeeded(session, integration, content["succeeds"])
        current["succeeds"] = "; ".join(_describe(row) for row in rows)
    return current


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    integration = _integration(uow.session, context.installation_id, content["integration_id"])
    succeeded = _succeeded(uow.session, integration, content.get("succeeds", []))
    created_at = utcnow()
    row = IntegrationToken(
        installation_id=integration.installation_id,
        integration_id=integration.id,
        label=content["label"],
        token_prefix=content["token_prefix"],
        token_hash=content["token_hash"],
        created_by_id=context.actor.id,
        created_at=created_at,
        # FOUR-8: a rotation keeps the standing of what it succeeds (stored times, no new reading)
        standing_since=min([created_at, *(t.standing_since for t in succeeded)]),
    )
    uow.session.add(row)
    uow.session.flush()
    succession = {"succeeds": [t.id for t in succeeded], "standing_since": iso(row.standing_since)}
    uow.audit(
        integration.installation_id,
        f"token-issued:{row.id}",
        "integration.token_issued",
        context.actor,
        "integration",
        integration.id,
        context.details(
            {
                "token_id": row.id,
                "label": row.label,
                "prefix": row.token_prefix,
                **(succession if succeeded else {}),
            }
        ),
    )
    return {"integration_id": integration.id, "token_id": row.id}


INTEGRATION_TOKEN = ChangeType(
    kind=ChangeKind.INTEGRATION_TOKEN,
    subject_type="integration",
    subject="integration_id",
    current=_current,
    summary=lambda content, current: (
        f"New token {content['token_prefix']}… for {(current or {}).get('integration', 'an integration')}"
        + (f" ({content['label']})" if content["label"] else "")
        + (" succeeding " + ", ".join(content["succeeds"]) if content.get("succeeds") else "")
    ),
    apply=_apply,
    display=lambda content, current: (
        {},
        {
            "integration": (current or {}).get("integration", content["integration_id"]),
            "label": content["label"],
            "token_prefix": content["token_prefix"],
            **({"succeeds": (current or {}).get("succeeds", content["succeeds"])} if content.get("succeeds") else {}),
        },
    ),
)


def propose_token(
    operator: OperatorUser, integration_id: str, label: str, succeeds: list[str] | None = None
) -> PendingChange:
    """Propose a bearer token for an integration of the operator's installation (FOUR-4).

    Args:
        operator: the admin proposing it (the web form, or the CLI's ``--proposer``).
        integration_id: the integration the token speaks for.
        label: what the token is for (up to 200 characters on one line; may be empty).
        succeeds: ids of active or revoked tokens of the same integration this one
            replaces (a rotation, FOUR-8): once approved it stands since the earliest
            standing of those, and may report results of actions sent before it.
            None or [] for none. The approving admin sees them in the diff.

    Returns:
        The `PendingChange`; its ``shown_once["token"]`` is the plaintext token, never
        available again and usable only once a second admin approves the change.

    Raises:
        ApiError: 404 ``integration_not_found`` (also another installation's);
            400 ``token_label_invalid``; 400 ``token_succeeds_invalid`` (a token
            of another integration, unknown, repeated, or more than 20).
        Nothing is stored on a refusal.
    """
    succeeds = [] if succeeds is None else succeeds
    label = label.strip() if isinstance(label, str) else ""
    if len(label) > MAX_TOKEN_LABEL or has_control_characters(label):
        raise ApiError(400, "token_label_invalid", "A label has at most 200 characters on one line.", "label")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    content = {
        "integration_id": integration_id,
        "label": label,
        "token_prefix": token[:12],
        "token_hash": sha256_hex(token),
    }
    with unit_of_work() as uow:
        integration = _integration(uow.session, operator.installation_id, integration_id)  # 404 before anything
        if succeeds != []:
            content["succeeds"] = [row.id for row in _succeeded(uow.session, integration, succeeds)]
        outcome = submit(uow, operator, INTEGRATION_TOKEN, content, shown_once={"token": token})
        uow.commit()
    return outcome


def cli_proposer(installation_slug: str, email: str) -> OperatorUser:
    """The admin a CLI command proposes a change as (FOUR-4: the CLI is no way round).

    Args:
        installation_slug: the installation's slug.
        email: an active admin of that installation.

    Raises:
        ApiError: 404 ``proposer_not_found`` (no such installation, no such user, or
            not an active admin there).
    """
    operator = db.session.scalar(
        select(OperatorUser)
        .join(Installation, Installation.id == OperatorUser.installation_id)
        .where(Installation.slug == installation_slug, OperatorUser.email == (email or "").strip().lower())
    )
    if operator is None or not operator.active or not operator.has_role("admin"):
        raise ApiError(404, "proposer_not_found", "No active admin with that e-mail in that installation.")
    return operator
