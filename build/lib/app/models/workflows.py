"""Workflows (graphs of nodes), their runs and step runs, and human tasks."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.domain.case_states import RunState, StepState, TaskState

from .base import Base, UTCDateTime, created_at_column, id_column, json_column, related, updated_at_column

if TYPE_CHECKING:
    from .cases import Decision
    from .tenancy import OperatorUser

AUTHORITY_MODES = ("off", "shadow", "assist", "bounded_auto")


class WorkflowDefinition(Base):
    __tablename__ = "workflow_definitions"
    __table_args__ = (UniqueConstraint("installation_id", "slug"),)

    id: Mapped[str] = id_column("wfd")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20), default="active")
    created_at: Mapped[datetime] = created_at_column()


class WorkflowVersion(Base):
    """A JSON graph of nodes with the authority it may act with.

    The graph: ``{"trigger": {"decision_codes": [...]}, "start": node_id,
    "nodes": {node_id: {"type": "action", "config": {...}, "input_mapping": {...},
    "next": {port: node_id}}}}``.
    """

    __tablename__ = "workflow_versions"
    __table_args__ = (UniqueConstraint("definition_id", "version"),)

    id: Mapped[str] = id_column("wfv")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    definition_id: Mapped[str] = mapped_column(ForeignKey("workflow_definitions.id"))
    version: Mapped[int] = mapped_column(default=1)
    authority_mode: Mapped[str] = mapped_column(String(20), default="assist")
    graph: Mapped[dict] = json_column("graph_json")
    active: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = created_at_column()


class WorkflowRun(Base):
    """One execution of a workflow version for one report."""

    __tablename__ = "workflow_runs"
    __table_args__ = (
        Index("ix_workflow_runs_waiting", "state", "wait_deadline_at"),
        UniqueConstraint("workflow_version_id", "trigger_key"),
    )

    id: Mapped[str] = id_column("run")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    workflow_version_id: Mapped[str] = mapped_column(ForeignKey("workflow_versions.id"))
    decision_id: Mapped[str | None] = mapped_column(ForeignKey("decisions.id"), nullable=True)
    appeal_id: Mapped[str | None] = mapped_column(ForeignKey("appeals.id"), nullable=True)
    trigger_key: Mapped[str] = mapped_column(String(300))  # what started it, once
    state: Mapped[str] = mapped_column(String(20), default=RunState.RUNNING.value)  # moves: app.domain.case_states.RUN
    current_node_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    branch_key: Mapped[str] = mapped_column(String(200), default="main")
    waiting_event_type: Mapped[str | None] = mapped_column(String(500), nullable=True)
    waiting_proposal_id: Mapped[str | None] = mapped_column(String(700), nullable=True)
    wait_deadline_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    outcome_port: Mapped[str | None] = mapped_column(String(50), nullable=True)
    last_error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    decision: Mapped[Decision | None] = related()  # the decision that started it


class StepRun(Base):
    """A node's execution within a run, per branch."""

    __tablename__ = "step_runs"
    __table_args__ = (UniqueConstraint("run_id", "node_id", "branch_key"),)

    id: Mapped[str] = mapped_column(String(600), primary_key=True)  # {run}:{node}:{branch}
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("workflow_runs.id"), index=True)
    node_id: Mapped[str] = mapped_column(String(200))
    branch_key: Mapped[str] = mapped_column(String(200), default="main")
    state: Mapped[str] = mapped_column(String(20), default=StepState.RUNNING.value)  # moves: STEP
    port: Mapped[str | None] = mapped_column(String(50), nullable=True)
    output: Mapped[dict | None] = json_column("output_json", nullable=True)
    error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()


class HumanTask(Base):
    """Work for a person: here, approving or rejecting an action proposal."""

    __tablename__ = "human_tasks"
    __table_args__ = (Index("ix_human_tasks_open", "installation_id", "state", "due_at"),)

    id: Mapped[str] = mapped_column(String(700), primary_key=True)
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("workflow_runs.id"), nullable=True)
    step_run_id: Mapped[str | None] = mapped_column(String(600), nullable=True)
    task_type: Mapped[str] = mapped_column(String(30), default="approval")
    state: Mapped[str] = mapped_column(String(20), default=TaskState.OPEN.value)  # moves: TASK
    queue_id: Mapped[str | None] = mapped_column(ForeignKey("queues.id"), nullable=True)
    context: Mapped[dict] = json_column("context_json", default=dict)
    context_digest: Mapped[str] = mapped_column(String(100), default="")
    response_schema: Mapped[dict] = json_column("response_schema_json", default=dict)
    action_proposal_id: Mapped[str | None] = mapped_column(
        ForeignKey("action_proposals.id"), nullable=True, unique=True
    )
    assigned_operator_id: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    proposal = related("ActionProposal")  # by name (see related): proposals.py imports this module
    assignee: Mapped[OperatorUser | None] = related()


class HumanTaskClaim(Base):
    """Who is working on a task, from claim to release."""

    __tablename__ = "human_task_claims"

    id: Mapped[str] = id_column("clm")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    task_id: Mapped[str] = mapped_column(ForeignKey("human_tasks.id"), index=True)
    operator_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    claimed_at: Mapped[datetime] = created_at_column()
    released_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    release_reason: Mapped[str | None] = mapped_column(String(100), nullable=True)
