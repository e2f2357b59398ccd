"""Retiring a component version (SPEC FOUR-4, FOUR-7): a pending change for a second
admin, refused while anything approved or waiting still needs the version.

A retired version can no longer prepare NEW actions; every proposal already prepared
with it keeps it (delivery, retry, reversals, "end now": `may_use_retired_version`).
Still, a version that open proposals, retryable failures or temporary actions in force
use is not retired: the request answers 409 ``component_version_in_use`` with how many
use it, when it is proposed and again when it is approved.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select

from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.domain.proposal import retirement as retirement_rules
from app.models import ActionProposal, ComponentDefinition, ComponentVersion, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, setting, submit
from app.services.admin.input import plausible_id
from app.services.admin.names import destination
from app.services.uow import UnitOfWork, unit_of_work

P = ActionProposal


def _version(session, installation_id: str, definition_id: Any, version_id: Any) -> ComponentVersion:
    version = session.get(ComponentVersion, version_id) if plausible_id(version_id) else None
    if version is None or version.installation_id != installation_id or version.definition_id != definition_id:
        raise ApiError(404, "component_version_not_found", "No such component version.")
    return version


def version_users(session, installation_id: str, version_id: str) -> int:
    """How many actions still need a component version (FOUR-7): open proposals prepared
    with it, those failed for good an operator may still retry, and temporary actions
    not ended whose reversal uses it (`app.domain.proposal.retirement.version_users`).

    Args:
        session: the database session.
        installation_id: the version's installation.
        version_id: the component version.

    Returns:
        The number of actions (0: retiring strands nothing).
    """
    rows = session.execute(
        select(
            P.id,
            P.state,
            P.delivery_terminal,
            P.expires_at,
            P.component_version_id,
            P.temporary,
            P.reverses_proposal_id,
        ).where(
            P.installation_id == installation_id,
            or_(P.component_version_id == version_id, P.temporary.is_not(None)),
        )
    ).all()
    return retirement_rules.version_users(version_id, (retirement_rules.VersionUse(*row) for row in rows), utcnow())


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    version = _version(session, installation_id, content["definition_id"], content["version_id"])
    definition = session.get(ComponentDefinition, version.definition_id)
    return {
        "component": f"{definition.name} v{version.version}",
        "destination": destination(
            session, version.implementation_kind, version.implementation_reference, version.connection_version_id
        ),
        "retired": version.retired_at is not None,
    }


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    session = uow.session
    version = _version(session, context.installation_id, content["definition_id"], content["version_id"])
    users = version_users(session, context.installation_id, version.id)
    if users:
        raise ApiError(
            409,
            "component_version_in_use",
            f"{users} open proposal{'s' if users != 1 else ''} or scheduled reversal{'s' if users != 1 else ''} "
            f"use{'s' if users == 1 else ''} this version: retiring it would strand them. "
            "Retire it when they have finished.",
        )
    if version.retired_at is None:
        version.retired_at = utcnow()
        uow.audit(
            context.installation_id,
            f"admin:component-version-retired:{version.id}",
            "admin.component_version_retired",
            context.actor,
            "component_version",
            version.id,
            context.details({"definition_id": version.definition_id, "version": version.version}),
        )
    return {"definition_id": version.definition_id, "version_id": version.id}


COMPONENT_RETIRE = ChangeType(
    kind=ChangeKind.COMPONENT_RETIRE,
    subject_type="component_version",
    subject="version_id",
    current=_current,
    summary=lambda content, current: f"Retire component {current['component']}",
    apply=_apply,
    display=setting("retired", True),
)


def retire_component_version(operator: OperatorUser, definition_id: str, version_id: str) -> PendingChange | None:
    """Propose retiring a component version: actions can no longer be prepared with it
    once a second admin approves (FOUR-4). Refused while proposals still need it (FOUR-7).

    Proposals already finished keep their version. Retiring a retired version changes
    nothing and stores nothing.

    Args:
        operator: the admin proposing it.
        definition_id: the component; version_id: one of its versions.

    Returns:
        The `PendingChange` stored, or None when the version is retired already.

    Raises:
        ApiError: 404 ``component_version_not_found`` (also for another installation's,
            or a version of another component); 409 ``component_version_in_use``
            naming how many open proposals and scheduled reversals use it.
    """
    with unit_of_work() as uow:
        version = _version(uow.session, operator.installation_id, definition_id, version_id)
        if version.retired_at is not None:
            return None
        outcome = submit(uow, operator, COMPONENT_RETIRE, {"definition_id": definition_id, "version_id": version_id})
        uow.commit()
    return outcome
