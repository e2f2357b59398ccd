"""Workflow graphs and node outcomes (SPEC WAIT-1).

A node either finishes on a port (``applied``, ``rejected``, ``timeout``, ``error``)
or waits for an event until a deadline. The graph says which node a port leads to;
a port with no next node ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .expressions import expression_problem

PORTS = ("applied", "rejected", "timeout", "error")
NODE_TYPES = ("action",)
MAX_STEPS_PER_RUN = 50


@dataclass(frozen=True)
class NodeOutcome:
    """What running (or resuming) a node gave."""

    port: str | None = None  # set when the node finished
    proposal_id: str | None = None
    payload_digest: str | None = None
    error_code: str | None = None
    event_type: str | None = None  # set when the node waits
    deadline: datetime | None = None
    task_id: str | None = None
    recovery_required: bool = False
    idempotent_replay: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def waiting(self) -> bool:
        return self.port is None

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if v not in (None, False, {})}
        if self.deadline is not None:
            data["deadline"] = self.deadline.isoformat()
        return data


def finished(port: str, **kwargs: Any) -> NodeOutcome:
    return NodeOutcome(port=port, **kwargs)


def waiting(event_type: str, deadline: datetime, **kwargs: Any) -> NodeOutcome:
    return NodeOutcome(event_type=event_type, deadline=deadline, **kwargs)


def graph_errors(graph: Any) -> list[str]:
    """Why a workflow graph cannot run (none: it can)."""
    if not isinstance(graph, dict):
        return ["The graph must be a JSON object."]
    nodes = graph.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        return ["The graph needs a non-empty 'nodes' object."]
    errors = []
    if not isinstance(graph.get("start"), str) or graph.get("start") not in nodes:
        errors.append("'start' must name a node.")
    trigger = graph.get("trigger", {})
    codes = trigger.get("decision_codes") if isinstance(trigger, dict) else None
    for node_id, node in nodes.items():
        if isinstance(node, dict):
            errors.extend(_mapping_errors(node_id, node.get("input_mapping", {})))
            errors.extend(_correction_errors(node_id, node.get("config")))
            errors.extend(_temporary_errors(node_id, node.get("config")))
    if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
        errors.append("'trigger.decision_codes' must be a list of decision codes.")
    for node_id, node in nodes.items():
        if not isinstance(node, dict) or node.get("type") not in NODE_TYPES:
            errors.append(f"Node {node_id!r} must be an object with type 'action'.")
            continue
        if not isinstance(node.get("config", {}), dict):
            errors.append(f"Node {node_id!r}: 'config' must be an object.")
        if not isinstance(node.get("input_mapping", {}), dict):
            errors.append(f"Node {node_id!r}: 'input_mapping' must be an object.")
        following = node.get("next") or {}
        if not isinstance(following, dict):
            errors.append(f"Node {node_id!r}: 'next' must map ports to node ids.")
            continue
        for port, next_id in following.items():
            if port not in PORTS or not isinstance(next_id, str) or next_id not in nodes:
                errors.append(f"Node {node_id!r}: next[{port!r}] must map a port to a node.")
    return errors


def _mapping_errors(node_id: str, mapping: Any) -> list[str]:
    """Input mapping expressions that cannot run (checked when a version is saved; SEC-5)."""
    if not isinstance(mapping, dict):
        return []
    problems = ((key, expression_problem(expression)) for key, expression in mapping.items())
    return [f"Node {node_id!r}: input_mapping[{key!r}] {problem}." for key, problem in problems if problem]


def _correction_errors(node_id: str, config: Any) -> list[str]:
    """The correction's payload mapping, checked like an input mapping (SEC-5); an
    empty one means the default (``original.payload``)."""
    correction = config.get("correction") if isinstance(config, dict) else None
    if not isinstance(correction, dict) or not correction.get("payload"):
        return []
    problem = expression_problem(correction["payload"])
    return [f"Node {node_id!r}: config.correction.payload {problem}."] if problem else []


def _temporary_errors(node_id: str, config: Any) -> list[str]:
    """A node's ``temporary`` settings (TEMP-1), refused at save: an object whose
    duration, when given, is 60 s .. 366 days and whose reversal is an object."""
    from .errors import ActionError
    from .proposal.temporary import check_duration

    temporary = config.get("temporary") if isinstance(config, dict) else None
    if temporary is None:
        return []
    if not isinstance(temporary, dict):
        return [f"Node {node_id!r}: config.temporary must be an object."]
    errors = []
    if "duration_seconds" in temporary:
        try:
            check_duration(temporary["duration_seconds"])
        except ActionError:
            errors.append(f"Node {node_id!r}: config.temporary.duration_seconds must be 60 s to 366 days.")
    if "reversal" in temporary and not isinstance(temporary["reversal"], dict):
        errors.append(f"Node {node_id!r}: config.temporary.reversal must be an object.")
    return errors


def next_node(graph: dict[str, Any], node_id: str, port: str) -> str | None:
    """The node a port leads to, or None when the run ends there."""
    following = (graph.get("nodes", {}).get(node_id) or {}).get("next") or {}
    target = following.get(port) if isinstance(following, dict) else None
    return target if isinstance(target, str) else None


def triggered_by(graph: dict[str, Any], decision_code: str) -> bool:
    trigger = graph.get("trigger") or {}
    return decision_code in (trigger.get("decision_codes") or [])
