"""Workflows for the admin screens: create definitions and versions (a JSON graph
with an authority mode), activate and deactivate versions. A bounded_auto version
is a configuration change for a second admin (SPEC FOUR-2, `app.services.admin.changes`).

When a decision is recorded, the newest *active* version of each workflow runs
(`app.services.cases.reports.active_versions`), so a new version is saved inactive
unless asked otherwise, and takes over when activated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.domain.config_changes import ChangeKind
from app.domain.digests import canonical_json
from app.domain.errors import ApiError
from app.domain.workflow import graph_errors
from app.extensions import db
from app.models import ComponentVersion, OperatorUser, WorkflowDefinition, WorkflowVersion
from app.models.workflows import AUTHORITY_MODES
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.admin.input import (
    InvalidInput,
    add_version,
    add_with_unique_slug,
    change_key,
    clean_name,
    clean_slug,
    latest_version,
    lock_owned,
    owned,
    parse_json_text,
    plausible_id,
)
from app.services.admin.names import name_workflow_side
from app.services.uow import UnitOfWork, unit_of_work

MAX_GRAPH_CHARS = 200_000


@dataclass(frozen=True)
class WorkflowVersionView:
    id: str
    version: int
    authority_mode: str
    graph: Any
    active: bool
    in_use: bool  # the newest active version: the one decisions start
    created_at: datetime


@dataclass(frozen=True)
class WorkflowListing:
    definition: WorkflowDefinition
    versions: list[WorkflowVersionView]  # newest first

    @property
    def latest(self) -> WorkflowVersionView | None:
        return self.versions[0] if self.versions else None


def _views(versions: list[WorkflowVersion]) -> list[WorkflowVersionView]:
    """Views of one definition's versions, newest first, marking the one in use."""
    in_use = next((v.id for v in versions if v.active), None)
    return [
        WorkflowVersionView(v.id, v.version, v.authority_mode, v.graph, v.active, v.id == in_use, v.created_at)
        for v in versions
    ]


def list_workflows(installation_id: str) -> list[WorkflowListing]:
    """The installation's workflow definitions by name, each with its versions."""
    definitions = db.session.scalars(
        select(WorkflowDefinition)
        .where(WorkflowDefinition.installation_id == installation_id)
        .order_by(WorkflowDefinition.name, WorkflowDefinition.id)
    ).all()
    grouped: dict[str, list[WorkflowVersion]] = {}
    for version in db.session.scalars(
        select(WorkflowVersion)
        .where(WorkflowVersion.installation_id == installation_id)
        .order_by(WorkflowVersion.definition_id, WorkflowVersion.version.desc())
    ):
        grouped.setdefault(version.definition_id, []).append(version)
    return [WorkflowListing(d, _views(grouped.get(d.id, []))) for d in definitions]


def workflow_detail(installation_id: str, definition_id: str) -> WorkflowListing:
    """One workflow definition of the installation with its versions.

    Raises:
        ApiError: 404 ``workflow_not_found`` (also for another installation's).
    """
    definition = db.session.get(WorkflowDefinition, definition_id) if plausible_id(definition_id) else None
    if definition is None or definition.installation_id != installation_id:
        raise ApiError(404, "workflow_not_found", "No such workflow.")
    versions = db.session.scalars(
        select(WorkflowVersion)
        .where(WorkflowVersion.definition_id == definition.id, WorkflowVersion.installation_id == installation_id)
        .order_by(WorkflowVersion.version.desc())
    ).all()
    return WorkflowListing(definition, _views(list(versions)))


def workflow_version_choices(installation_id: str) -> list[tuple[str, str]]:
    """(id, label) of every workflow version of the installation, for a select."""
    rows = db.session.execute(
        select(WorkflowVersion.id, WorkflowVersion.version, WorkflowVersion.active, WorkflowDefinition.name)
        .join(WorkflowDefinition, WorkflowDefinition.id == WorkflowVersion.definition_id)
        .where(WorkflowVersion.installation_id == installation_id)
        .order_by(WorkflowDefinition.name, WorkflowVersion.version.desc())
    ).all()
    return [(r.id, f"{r.name} v{r.version}{'' if r.active else ' (inactive)'}") for r in rows]


def _component_problems(uow: UnitOfWork, installation_id: str, graph: dict[str, Any]) -> list[str]:
    """Component versions a graph names must be this installation's."""
    named: list[tuple[str, Any]] = []
    for node_id, node in graph["nodes"].items():
        config = node.get("config") or {}
        if "component_version_id" in config:
            named.append((f"Node {node_id!r}: config.component_version_id", config["component_version_id"]))
        correction = config.get("correction")
        if isinstance(correction, dict) and "component_version_id" in correction:
            named.append(
                (f"Node {node_id!r}: config.correction.component_version_id", correction["component_version_id"])
            )
    ids = {value for _, value in named if plausible_id(value)}
    known = (
        set(
            uow.session.scalars(
                select(ComponentVersion.id).where(
                    ComponentVersion.installation_id == installation_id, ComponentVersion.id.in_(ids)
                )
            )
        )
        if ids
        else set()
    )
    return [
        f"{where} must name one of this installation's component versions."
        for where, value in named
        if not (plausible_id(value) and value in known)
    ]


def _clean_version(uow: UnitOfWork, installation_id: str, authority_mode: Any, graph_text: Any) -> dict[str, Any]:
    _check_authority_mode(authority_mode)
    graph, canonical = parse_json_text(
        graph_text, code="workflow_graph_invalid", field="graph", label="The graph", max_chars=MAX_GRAPH_CHARS
    )
    problems = graph_errors(graph)
    if not problems:
        problems = _component_problems(uow, installation_id, graph)
    if problems:
        count = len(problems)
        raise InvalidInput(
            400,
            "workflow_graph_invalid",
            f"The graph cannot run: {count} problem{'s' if count > 1 else ''}.",
            "graph",
            problems,
        )
    return {"authority_mode": authority_mode, "graph": graph}


def _check_authority_mode(authority_mode: Any) -> None:
    if authority_mode not in AUTHORITY_MODES:
        raise ApiError(
            400,
            "workflow_authority_mode_invalid",
            "The authority mode is one of: " + ", ".join(AUTHORITY_MODES) + ".",
            "authority_mode",
        )


def _version_content(authority_mode: Any, graph_text: Any, active: Any) -> dict[str, Any]:
    """A version as a change's content; `_clean_version` checks it fully when it applies."""
    _check_authority_mode(authority_mode)
    graph, _ = parse_json_text(
        graph_text, code="workflow_graph_invalid", field="graph", label="The graph", max_chars=MAX_GRAPH_CHARS
    )
    return {"authority_mode": authority_mode, "graph": graph, "active": bool(active)}


def _columns(uow: UnitOfWork, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return _clean_version(uow, installation_id, content["authority_mode"], canonical_json(content["graph"]))


def _apply_create(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    columns = _columns(uow, installation_id, content)
    definition = WorkflowDefinition(
        installation_id=installation_id, name=content["name"], slug=content["slug"], status="active"
    )
    add_with_unique_slug(uow.session, definition, "A workflow")
    version = _add_version(uow, definition, 1, columns, content["active"])
    uow.audit(
        installation_id,
        f"admin:workflow-created:{definition.id}",
        "admin.workflow_created",
        context.actor,
        "workflow_definition",
        definition.id,
        context.details(
            {
                "name": content["name"],
                "slug": content["slug"],
                "version_id": version.id,
                "version": 1,
                "authority_mode": version.authority_mode,
                "active": version.active,
            }
        ),
    )
    return {"definition_id": definition.id, "version_id": version.id}


def _lock_definition(session, installation_id: str, definition_id: Any) -> WorkflowDefinition:
    return lock_owned(session, WorkflowDefinition, definition_id, installation_id, "workflow_not_found", "workflow")


def _current_version(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    definition = owned(
        session, WorkflowDefinition, content["definition_id"], installation_id, "workflow_not_found", "workflow"
    )
    latest = latest_version(session, WorkflowVersion, WorkflowVersion.definition_id, definition.id)
    current: dict[str, Any] = {"workflow": definition.name, "version": latest.version if latest else 0}
    if latest is not None:
        current |= {"authority_mode": latest.authority_mode, "graph": latest.graph, "active": latest.active}
    return current


def _apply_version(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    installation_id = context.installation_id
    definition = _lock_definition(uow.session, installation_id, content["definition_id"])
    columns = _columns(uow, installation_id, content)
    latest = latest_version(uow.session, WorkflowVersion, WorkflowVersion.definition_id, definition.id)
    version = _add_version(uow, definition, (latest.version if latest else 0) + 1, columns, content["active"])
    uow.audit(
        installation_id,
        f"admin:workflow-version-created:{version.id}",
        "admin.workflow_version_created",
        context.actor,
        "workflow_definition",
        definition.id,
        context.details(
            {
                "version_id": version.id,
                "version": version.version,
                "authority_mode": version.authority_mode,
                "active": version.active,
            }
        ),
    )
    return {"definition_id": definition.id, "version_id": version.id}


WORKFLOW_CREATE = ChangeType(
    kind=ChangeKind.WORKFLOW_CREATE,
    subject_type="workflow_definition",
    summary=lambda content, current: f"New workflow {content['name']!r} ({content['authority_mode']})",
    apply=_apply_create,
    names=name_workflow_side,
)
WORKFLOW_VERSION = ChangeType(
    kind=ChangeKind.WORKFLOW_VERSION,
    subject_type="workflow_definition",
    subject="definition_id",
    current=_current_version,
    summary=lambda content, current: (
        f"Workflow {current['workflow']!r}: version {current['version'] + 1} ({content['authority_mode']}"
        f"{', active' if content['active'] else ''})"
    ),
    apply=_apply_version,
    names=name_workflow_side,
)


def create_workflow(
    operator: OperatorUser, *, name: str, slug: str, authority_mode: str, graph: str, active: bool
) -> tuple[str, str] | PendingChange:
    """Create a workflow definition and its version 1, or propose it (FOUR-2).

    A bounded_auto workflow is a change for a second admin: it is stored pending
    and nothing is created until another admin approves it.

    Args:
        operator: the admin doing it (their installation owns the rows).
        name: 1..200 characters; slug: unique in the installation.
        authority_mode: ``off``, ``shadow``, ``assist`` or ``bounded_auto``.
        graph: the graph as JSON text (at most 200,000 characters); see
            `app.models.workflows.WorkflowVersion` for its shape. Component
            versions it names must be this installation's.
        active: whether decisions start this version from now on.

    Returns:
        (definition id, version id), or the `PendingChange` stored.

    Raises:
        ApiError: 400 ``name_invalid``, ``slug_invalid``,
            ``workflow_authority_mode_invalid``, ``workflow_graph_invalid`` (with
            every problem of the graph); 409 ``slug_taken``.
    """
    content = {"name": clean_name(name), "slug": clean_slug(slug), **_version_content(authority_mode, graph, active)}
    with unit_of_work() as uow:
        outcome = submit(uow, operator, WORKFLOW_CREATE, content)
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else (outcome["definition_id"], outcome["version_id"])


def create_workflow_version(
    operator: OperatorUser, definition_id: str, *, authority_mode: str, graph: str, active: bool
) -> str | PendingChange:
    """Add a version to a workflow of the operator's installation, or propose it (FOUR-2:
    a bounded_auto version waits for a second admin).

    Runs already started keep their version.

    Returns:
        The new version's id, or the `PendingChange` stored.

    Raises:
        ApiError: 404 ``workflow_not_found``; 400 ``workflow_authority_mode_invalid``,
            ``workflow_graph_invalid``; 409 ``version_conflict``.
    """
    with unit_of_work() as uow:
        _lock_definition(uow.session, operator.installation_id, definition_id)  # 404 before the form's checks
        content = {"definition_id": definition_id, **_version_content(authority_mode, graph, active)}
        outcome = submit(uow, operator, WORKFLOW_VERSION, content)
        uow.commit()
    return outcome if isinstance(outcome, PendingChange) else outcome["version_id"]


def _add_version(
    uow: UnitOfWork, definition: WorkflowDefinition, number: int, columns: dict[str, Any], active: bool
) -> WorkflowVersion:
    version = WorkflowVersion(
        installation_id=definition.installation_id,
        definition_id=definition.id,
        version=number,
        active=active,
        **columns,
    )
    return add_version(uow.session, version)


def _version_for_change(session, installation_id: str, definition_id: Any, version_id: Any) -> WorkflowVersion:
    version = session.get(WorkflowVersion, version_id) if plausible_id(version_id) else None
    if version is None or version.installation_id != installation_id or version.definition_id != definition_id:
        raise ApiError(404, "workflow_version_not_found", "No such workflow version.")
    return version


def _current_active(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    version = _version_for_change(session, installation_id, content["definition_id"], content["version_id"])
    definition = session.get(WorkflowDefinition, version.definition_id)
    return {"workflow": f"{definition.name} v{version.version}", "active": version.active}


def _apply_active(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    version = _version_for_change(uow.session, context.installation_id, content["definition_id"], content["version_id"])
    active = content["active"]
    if version.active != active:
        version.active = active
        verb = "activated" if active else "deactivated"
        uow.audit(
            context.installation_id,
            change_key(f"workflow-version-{verb}", version.id),
            f"admin.workflow_version_{verb}",
            context.actor,
            "workflow_version",
            version.id,
            context.details({"definition_id": version.definition_id, "version": version.version}),
        )
    return {"definition_id": version.definition_id, "version_id": version.id}


WORKFLOW_ACTIVE = ChangeType(
    kind=ChangeKind.WORKFLOW_ACTIVE,
    subject_type="workflow_version",
    subject="version_id",
    current=_current_active,
    summary=lambda content, current: (
        f"{'Activate' if content['active'] else 'Deactivate'} workflow {(current or {}).get('workflow', '')}".strip()
    ),
    apply=_apply_active,
    hidden=("definition_id",),
)


def set_workflow_version_active(
    operator: OperatorUser, definition_id: str, version_id: str, active: bool
) -> PendingChange | None:
    """Propose activating or deactivating a workflow version (FOUR-4). Decisions start
    the newest active version of each workflow, so either changes which actions are
    proposed: it applies when a second admin approves. Runs already started are not
    affected. Setting the state it has changes nothing and stores nothing.

    Returns:
        The `PendingChange` stored, or None when nothing would change.

    Raises:
        ApiError: 404 ``workflow_version_not_found`` (also for another
            installation's, or a version of another workflow).
    """
    with unit_of_work() as uow:
        version = _version_for_change(uow.session, operator.installation_id, definition_id, version_id)
        if version.active == bool(active):
            return None
        content = {"definition_id": definition_id, "version_id": version_id, "active": bool(active)}
        outcome = submit(uow, operator, WORKFLOW_ACTIVE, content)
        uow.commit()
    return outcome
