"""Tables, one module per concept of the domain. Importing this registers them all."""

from .approvals import ApprovalNotice, ApprovalSettingsVersion, ApprovalVote, EmergencyReview, ProtectedSubject
from .attempts import ConnectionAttempt
from .audit import AuditEvent
from .base import Base, CanonicalJSON, insert_ignore, new_id
from .bulk import BulkBatch, BulkCap, BulkItem
from .budgets import Budget, BudgetReservation
from .cases import Appeal, AppealCorrection, AppealDecision, Decision, Report, ReportTarget
from .changes import ConfigChange
from .components import ComponentDefinition, ComponentVersion, Connection, ConnectionHealth, ConnectionVersion
from .dsa import DsaSettingsVersion, DsaStatement, move_statements
from .erasure import ErasureRequest, RetentionSetting
from .evidence import ReportEvidence
from .integrations import Integration, IntegrationToken, Queue
from .labels import CodeLabel
from .moves import move_by_id, move_many, move_row, take_run
from .operations import SweepRun
from .outbox import WorkflowDispatchOutbox, WorkflowEventInbox
from .proposals import (
    ActionApproval,
    ActionProposal,
    ActionReceiptRecord,
    move_batch_items,
    move_loaded,
    move_proposal,
)
from .queue import ReportSubject, claim_active_sql, claim_blocks_sql, overdue_sql, queue_targets
from .sso import SsoGroupRole, SsoIdentity
from .tenancy import Installation, OperatorInvitation, OperatorRecoveryCode, OperatorUser
from .workflows import HumanTask, HumanTaskClaim, StepRun, WorkflowDefinition, WorkflowRun, WorkflowVersion

__all__ = [
    "ActionApproval",
    "ActionProposal",
    "ActionReceiptRecord",
    "ApprovalNotice",
    "ApprovalSettingsVersion",
    "ApprovalVote",
    "EmergencyReview",
    "ProtectedSubject",
    "Appeal",
    "AppealCorrection",
    "AppealDecision",
    "AuditEvent",
    "Base",
    "ErasureRequest",
    "Budget",
    "BudgetReservation",
    "BulkBatch",
    "BulkCap",
    "BulkItem",
    "CanonicalJSON",
    "CodeLabel",
    "ComponentDefinition",
    "ComponentVersion",
    "ConfigChange",
    "Connection",
    "ConnectionAttempt",
    "ConnectionHealth",
    "ConnectionVersion",
    "Decision",
    "DsaSettingsVersion",
    "DsaStatement",
    "HumanTask",
    "HumanTaskClaim",
    "Installation",
    "Integration",
    "IntegrationToken",
    "OperatorInvitation",
    "OperatorRecoveryCode",
    "OperatorUser",
    "Queue",
    "Report",
    "ReportEvidence",
    "RetentionSetting",
    "ReportSubject",
    "ReportTarget",
    "SsoGroupRole",
    "SsoIdentity",
    "StepRun",
    "SweepRun",
    "WorkflowDefinition",
    "WorkflowDispatchOutbox",
    "WorkflowEventInbox",
    "WorkflowRun",
    "WorkflowVersion",
    "claim_active_sql",
    "claim_blocks_sql",
    "insert_ignore",
    "move_batch_items",
    "move_by_id",
    "move_many",
    "move_loaded",
    "move_proposal",
    "move_row",
    "move_statements",
    "new_id",
    "overdue_sql",
    "queue_targets",
    "take_run",
]
