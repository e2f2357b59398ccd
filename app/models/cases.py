"""Cases: reports, their targets, decisions, appeals and appeal corrections."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.domain.case_states import AppealState, CompletionState, CorrectionState, ReportState

from .base import Base, UTCDateTime, created_at_column, id_column, json_column, related, updated_at_column

if TYPE_CHECKING:
    from .tenancy import OperatorUser

APPEAL_OUTCOMES = ("upheld", "modified", "reversed")


class Report(Base):
    """A case a platform sent us, routed to a review queue."""

    __tablename__ = "reports"
    __table_args__ = (
        UniqueConstraint("integration_id", "external_id"),
        UniqueConstraint("installation_id", "public_reference"),
        Index("ix_reports_list", "installation_id", "created_at", "id"),
        Index("ix_reports_subject", "subject_id", "state", "created_at"),
    )

    id: Mapped[str] = id_column("rep")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    integration_id: Mapped[str] = mapped_column(ForeignKey("integrations.id"), index=True)
    queue_id: Mapped[str | None] = mapped_column(ForeignKey("queues.id"), nullable=True, index=True)
    external_id: Mapped[str] = mapped_column(String(200))  # the platform's own report id
    public_reference: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), default=ReportState.OPEN.value)  # moves: case_states.REPORT
    policy_version_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    category: Mapped[str] = mapped_column(String(100), default="")
    reason: Mapped[str] = mapped_column(String(100), default="")  # the reporter's reason, e.g. spam
    # DSA-2: where it came from (`app.domain.dsa_facts.REPORT_SOURCES`); None: a notice from the platform
    source: Mapped[str | None] = mapped_column(String(30), nullable=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    # the queue's row for its first target (QUEUE-1); None for a bulk batch's own case
    subject_id: Mapped[str | None] = mapped_column(ForeignKey("report_subjects.id"), nullable=True)
    # who opened it in the console for a subject nobody reported (a proactive action)
    opened_by_id: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    erased_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # OPS-4: summary erased
    erased_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)  # request, retention
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    targets: Mapped[list[ReportTarget]] = related(order_by="(ReportTarget.position, ReportTarget.id)")
    decisions: Mapped[list[Decision]] = related(order_by="(Decision.created_at.desc(), Decision.seq.desc())")
    # by name (see related): workflows.py and proposals.py import this module
    runs = related("WorkflowRun", order_by="(WorkflowRun.created_at.desc(), WorkflowRun.id)")
    proposals = related("ActionProposal", order_by="(ActionProposal.created_at.desc(), ActionProposal.id)")
    appeals: Mapped[list[Appeal]] = related(order_by="(Appeal.created_at.desc(), Appeal.id)")


class ReportTarget(Base):
    """What a report is about, e.g. ``post:123``."""

    __tablename__ = "report_targets"

    id: Mapped[str] = id_column("tgt")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    target_reference: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(50))
    position: Mapped[int] = mapped_column(default=0)  # the first target is position 0
    created_at: Mapped[datetime] = created_at_column()


class Decision(Base):
    """A moderator's decision on a report, enforced by the report's workflows."""

    __tablename__ = "decisions"
    __table_args__ = (
        Index("ix_decisions_latest", "report_id", "created_at", "seq"),
        UniqueConstraint("report_id", "seq"),
    )

    id: Mapped[str] = id_column("dec")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"))
    # Tie-breaker for decisions made within the same clock tick ("latest" must be total).
    seq: Mapped[int] = mapped_column(default=0)
    decision_code: Mapped[str] = mapped_column(String(100))
    maker_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    rationale: Mapped[str] = mapped_column(Text, default="")
    policy_version_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()

    maker: Mapped[OperatorUser] = related()


class Appeal(Base):
    """An appeal against a decision, from the platform or entered in the console."""

    __tablename__ = "appeals"
    __table_args__ = (UniqueConstraint("report_id", "external_id"),)

    id: Mapped[str] = id_column("apl")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    decision_id: Mapped[str] = mapped_column(ForeignKey("decisions.id"))
    external_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    state: Mapped[str] = mapped_column(String(20), default=AppealState.OPEN.value)  # moves: APPEAL
    statement: Mapped[str] = mapped_column(Text, default="")
    created_by_type: Mapped[str] = mapped_column(String(30), default="operator")
    created_by_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    erased_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # OPS-4: statement erased
    erased_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    report: Mapped[Report] = related()
    contested: Mapped[Decision] = related()  # the decision the appeal is against
    decisions: Mapped[list[AppealDecision]] = related(order_by="(AppealDecision.created_at, AppealDecision.id)")
    corrections: Mapped[list[AppealCorrection]] = related(order_by="(AppealCorrection.created_at, AppealCorrection.id)")


class AppealDecision(Base):
    """An operator's outcome on an appeal: upheld, modified or reversed."""

    __tablename__ = "appeal_decisions"

    id: Mapped[str] = id_column("apd")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    appeal_id: Mapped[str] = mapped_column(ForeignKey("appeals.id"), index=True)
    outcome: Mapped[str] = mapped_column(String(20))
    maker_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)
    completion_state: Mapped[str] = mapped_column(String(20), default=CompletionState.WAITING.value)
    correction_confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    rationale_redacted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    maker: Mapped[OperatorUser] = related()


class AppealCorrection(Base):
    """The correction of an original enforcement after a modified/reversed appeal."""

    __tablename__ = "appeal_corrections"

    id: Mapped[str] = id_column("cor")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    appeal_id: Mapped[str] = mapped_column(ForeignKey("appeals.id"), index=True)
    appeal_decision_id: Mapped[str] = mapped_column(ForeignKey("appeal_decisions.id"), index=True)
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    integration_id: Mapped[str] = mapped_column(ForeignKey("integrations.id"))
    original_proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"))
    original_operation_id: Mapped[str] = mapped_column(String(700))
    original_target: Mapped[dict[str, Any]] = json_column("original_target_json")
    original_payload_digest: Mapped[str] = mapped_column(String(100))
    mode: Mapped[str] = mapped_column(String(20))  # automated, manual
    state: Mapped[str] = mapped_column(String(20), default=CorrectionState.PENDING.value)  # moves: CORRECTION
    approved_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    proposal_id: Mapped[str | None] = mapped_column(ForeignKey("action_proposals.id"), nullable=True, unique=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    # by name (see related): proposals.py imports this module
    original = related("ActionProposal", foreign_keys=[original_proposal_id])  # the action it corrects
    proposal = related("ActionProposal", foreign_keys=[proposal_id])  # the correcting action, once made
    approver: Mapped[OperatorUser | None] = related()
