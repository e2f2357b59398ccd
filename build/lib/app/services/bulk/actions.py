"""The actions a bulk batch may take (SPEC BULK-1): an action node of the newest active
version of an active workflow, with a decision code that workflow is triggered by.

A batch takes exactly what a single decision's workflow would take: the node's
component version, action code, input mapping (payload, idempotency key,
preconditions) and temporary plan; only its approval differs (one over the batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.domain.errors import ActionError, ApiError
from app.models import ComponentVersion, WorkflowDefinition, WorkflowVersion
from app.services.cases.reports import active_versions
from app.services.lifecycle.action_targets import load_action_component

ACTION_INVALID = "bulk_action_invalid"


@dataclass(frozen=True)
class BulkAction:
    """What every item of a batch does.

    Attributes:
        key: ``{workflow_version_id}:{node_id}``, what the form names.
        node: the action node ({config, input_mapping}).
        authority_mode: the workflow version's authority (PREP-1).
        label: the technical description (codes and ids), for logs and JSON.
    """

    workflow_version_id: str
    node_id: str
    decision_code: str
    node: dict[str, Any]
    authority_mode: str
    label: str
    workflow_name: str = ""  # the workflow's name (WorkflowDefinition.name), for the words people read

    @property
    def key(self) -> str:
        return f"{self.workflow_version_id}:{self.node_id}"

    @property
    def config(self) -> dict[str, Any]:
        return self.node.get("config") or {}

    @property
    def component_version_id(self) -> str:
        return self.config["component_version_id"]

    @property
    def action_code(self) -> str:
        return self.config["action_code"]

    def as_dict(self) -> dict[str, Any]:
        """What a dry run's digest covers of the action (BULK-2)."""
        return {
            "workflow_version_id": self.workflow_version_id,
            "node_id": self.node_id,
            "component_version_id": self.component_version_id,
            "action_code": self.action_code,
            "decision_code": self.decision_code,
        }


def _action_nodes(version: WorkflowVersion):
    for node_id, node in sorted((version.graph.get("nodes") or {}).items()):
        config = node.get("config") if isinstance(node, dict) else None
        if node.get("type") == "action" and isinstance(config, dict) and config.get("component_version_id"):
            yield node_id, node


def bulk_actions(session: Session, installation_id: str) -> list[BulkAction]:
    """Every (action node, decision code) a batch may take now, in a stable order:
    the newest active version of each active workflow, each decision code its
    trigger names, each action node of its graph whose component can act."""
    choices = []
    for version in active_versions(session, installation_id):
        if version.authority_mode in ("off", "shadow"):
            continue
        codes = (version.graph.get("trigger") or {}).get("decision_codes") or []
        definition = session.get(WorkflowDefinition, version.definition_id)
        for node_id, node in _action_nodes(version):
            component = session.get(ComponentVersion, node["config"]["component_version_id"])
            if component is None or component.retired_at is not None:
                continue
            for code in codes:
                label = f"{code} → {node['config'].get('action_code', node_id)} (workflow {version.id}, node {node_id})"
                choices.append(BulkAction(version.id, node_id, code, node, version.authority_mode, label,
                                          definition.name if definition is not None else ""))
    return choices


def load_action(session: Session, installation_id: str, key: Any, decision_code: Any) -> BulkAction:
    """The action a form names, checked as a run would check it (PREP-1..3, BULK-1).

    Args:
        key: ``{workflow_version_id}:{node_id}``.
        decision_code: a code the workflow's trigger names.

    Raises:
        ApiError: 400 ``bulk_action_invalid`` when the node is not an action of the
            newest active version of an active workflow triggered by that code, or
            its component cannot act.
    """
    if not isinstance(key, str) or not isinstance(decision_code, str):
        raise ApiError(400, ACTION_INVALID, "Choose an action and a decision code.", "action")
    for action in bulk_actions(session, installation_id):
        if action.key == key and action.decision_code == decision_code:
            try:
                load_action_component(session, action.component_version_id, installation_id)
            except ActionError as error:
                raise ApiError(400, ACTION_INVALID, f"This action cannot act now ({error.code}).", "action") from error
            return action
    if any(a.key == key for a in bulk_actions(session, installation_id)):
        raise ApiError(400, ACTION_INVALID, "This workflow is not triggered by that decision code.", "decision_code")
    raise ApiError(
        400, ACTION_INVALID, "No such action: choose one of an active workflow's actions.", "action"
    )

