"""Caps on items per bulk batch, per role (SPEC BULK-5): read them for the admin page,
and let an admin propose one, applied when a second admin approves it by its digest
(FOUR-2; raising and lowering alike, see `app.domain.config_changes`).

A role without a cap of its own takes `app.domain.bulk.batch.DEFAULT_CAP`; an
operator's cap is the largest of their roles' (`app.services.bulk.dry_runs.operator_cap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.domain.bulk.batch import DEFAULT_CAP
from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.extensions import db
from app.models import BulkCap, OperatorUser
from app.models.tenancy import ROLES
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import parse_int
from app.services.uow import UnitOfWork, unit_of_work

MAX_CAP = 100_000


@dataclass(frozen=True)
class CapRow:
    """One role's cap: `custom` when an approved change set it, else the default."""

    role: str
    max_items: int
    custom: bool


def _caps(session, installation_id: str) -> dict[str, int]:
    rows = session.execute(
        select(BulkCap.role, BulkCap.max_items).where(BulkCap.installation_id == installation_id)
    ).all()
    return {role: max_items for role, max_items in rows}


def cap_table(installation_id: str) -> list[CapRow]:
    """Every known role with its items per batch (BULK-5), in the order of `ROLES`."""
    caps = _caps(db.session, installation_id)
    return [CapRow(role, caps.get(role, DEFAULT_CAP), role in caps) for role in ROLES]


def check_cap(role: Any, max_items: Any) -> tuple[str, int]:
    """A proposed cap, checked (BULK-5).

    Args:
        role: one of `app.models.tenancy.ROLES`.
        max_items: a whole number 1..100,000 (int or decimal text).

    Returns:
        (role, max_items).

    Raises:
        ApiError: 400 ``bulk_cap_role_invalid``; 400 ``bulk_cap_invalid``.
    """
    if not isinstance(role, str) or role.strip() not in ROLES:
        raise ApiError(400, "bulk_cap_role_invalid", f"Choose one of the roles: {', '.join(ROLES)}.", "role")
    count = parse_int(
        max_items,
        code="bulk_cap_invalid",
        field="max_items",
        minimum=1,
        maximum=MAX_CAP,
        message=f"The cap is a whole number of items from 1 to {MAX_CAP:,}.",
    )
    return role.strip(), count


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"role": content["role"], "max_items": _caps(session, installation_id).get(content["role"], DEFAULT_CAP)}


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    role, max_items = check_cap(content["role"], content["max_items"])
    installation_id = context.installation_id
    row = uow.session.get(BulkCap, (installation_id, role))
    previous = row.max_items if row is not None else DEFAULT_CAP
    if row is None:
        uow.session.add(BulkCap(installation_id=installation_id, role=role, max_items=max_items))
    else:
        row.max_items = max_items
    uow.session.flush()
    uow.audit(
        installation_id,
        f"bulk-cap-set:{role}:{utcnow().isoformat()}",
        "bulk.cap_set",
        context.actor,
        "bulk_cap",
        f"{installation_id}:{role}",
        context.details({"role": role, "max_items": max_items, "previous": previous}),
    )
    return {"role": role, "max_items": max_items}


BULK_CAP = ChangeType(
    kind=ChangeKind.BULK_CAP,
    subject_type="bulk_cap",
    subject="role",
    current=_current,
    summary=lambda content, current: (
        f"Items per bulk batch for {content['role']}: "
        f"{(current or {}).get('max_items', DEFAULT_CAP):,} → {content['max_items']:,}"
    ),
    apply=_apply,
    display=lambda content, current: (dict(current or {}), {"role": content["role"], "max_items": content["max_items"]}),
)


def propose_cap(operator: OperatorUser, *, role: Any, max_items: Any) -> PendingChange | None:
    """Propose the items per bulk batch for one role (BULK-5). A cap says how many
    subjects one reviewed decision may enforce, so it applies only when a second admin
    approves it (FOUR-2), whether it raises or lowers the cap.

    Args:
        operator: an admin of the installation.
        role: one of `app.models.tenancy.ROLES`.
        max_items: a whole number of items, 1..100,000 (int or decimal text).

    Returns:
        The `PendingChange` stored, or None when the role's cap is that already.

    Raises:
        ApiError: 403 ``forbidden`` (not an admin); 400 ``bulk_cap_role_invalid``,
            ``bulk_cap_invalid``. Nothing is stored then.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can propose a bulk cap.")
    role, max_items = check_cap(role, max_items)
    with unit_of_work() as uow:
        if _caps(uow.session, operator.installation_id).get(role, DEFAULT_CAP) == max_items:
            return None
        outcome = submit(uow, operator, BULK_CAP, {"role": role, "max_items": max_items})
        uow.commit()
    return outcome
