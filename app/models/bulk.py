"""Bulk batches and their items (SPEC BULK): one reviewed decision over many subjects.

A batch starts as a dry run (its frozen item list and counts), becomes submitted
(one proposal per acting item, `ActionProposal.bulk_batch_id`), and is approved once
by its digest. Its state moves only through `app.models.moves` (machine
`app.domain.case_states.BATCH`); what its items did is read from their proposals.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.domain.case_states import BatchState

from .base import Base, UTCDateTime, created_at_column, id_column, json_column, related, updated_at_column

if TYPE_CHECKING:
    from .tenancy import OperatorUser


class BulkBatch(Base):
    """One bulk action: its selection, its action, its items and its one approval."""

    __tablename__ = "bulk_batches"
    __table_args__ = (
        UniqueConstraint("installation_id", "public_reference"),
        Index("ix_bulk_batches_list", "installation_id", "created_at", "id"),
    )

    id: Mapped[str] = id_column("blk")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    public_reference: Mapped[str] = mapped_column(String(40))  # B-XXXXXXXX
    kind: Mapped[str] = mapped_column(String(20), default="enforce")  # enforce, undo (BULK-8)
    undoes_batch_id: Mapped[str | None] = mapped_column(ForeignKey("bulk_batches.id"), nullable=True, index=True)
    # {source: list|reports|author, text?|filter?|author_reference?}: what the selection
    # was made from, resolved again at approval (BULK-4)
    selection: Mapped[dict[str, Any]] = json_column("selection_json")
    # the action: an action node of an active workflow version, and the decision it enforces
    workflow_version_id: Mapped[str | None] = mapped_column(ForeignKey("workflow_versions.id"), nullable=True)
    node_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    component_version_id: Mapped[str] = mapped_column(ForeignKey("component_versions.id"))
    action_code: Mapped[str] = mapped_column(String(200))
    decision_code: Mapped[str] = mapped_column(String(100))
    reason: Mapped[str] = mapped_column(Text, default="")
    # the batch's own case: the report its list-selected items are proposed on (BULK-9)
    report_id: Mapped[str | None] = mapped_column(ForeignKey("reports.id"), nullable=True)
    state: Mapped[str] = mapped_column(String(20), default=BatchState.DRY_RUN.value)  # moves: case_states.BATCH
    maker_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    approved_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    # POL-3: the approval policies that applied to the batch (`route_record`); None: the default
    approval_route: Mapped[dict[str, Any] | None] = json_column("approval_route_json", nullable=True)
    approved_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    ended_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)  # reject/cancel
    dry_run_digest: Mapped[str] = mapped_column(String(100))  # the frozen item list (BULK-2)
    batch_digest: Mapped[str | None] = mapped_column(String(100), nullable=True)  # sorted item digests (BULK-3)
    counts: Mapped[dict[str, Any]] = json_column("counts_json", default=dict)  # dry-run outcome -> count
    item_count: Mapped[int] = mapped_column(Integer, default=0)  # items that would act
    drift_share: Mapped[float | None] = mapped_column(Float, nullable=True)  # measured at approval (BULK-4)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()

    maker: Mapped[OperatorUser] = related(foreign_keys=[maker_id])


class BulkItem(Base):
    """One subject of a batch: its dry-run outcome and, once submitted, its proposal."""

    __tablename__ = "bulk_items"
    __table_args__ = (
        UniqueConstraint("batch_id", "position"),
        Index("ix_bulk_items_outcome", "batch_id", "outcome", "position"),
    )

    id: Mapped[str] = id_column("bki")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    batch_id: Mapped[str] = mapped_column(ForeignKey("bulk_batches.id"))
    position: Mapped[int] = mapped_column(Integer)  # 0-based, in selection order
    subject_reference: Mapped[str] = mapped_column(String(500))
    kind: Mapped[str] = mapped_column(String(50))
    line: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the input line, for a pasted list
    # would_act, already_applied, protected, invalid, duplicate (BULK-2)
    outcome: Mapped[str] = mapped_column(String(30))
    detail: Mapped[str | None] = mapped_column(String(300), nullable=True)  # why, for other outcomes
    report_ids: Mapped[list[str]] = json_column("report_ids_json", default=list)  # decided together (BULK-9)
    proposal_id: Mapped[str | None] = mapped_column(
        ForeignKey("action_proposals.id"), nullable=True, unique=True
    )
    undoes_proposal_id: Mapped[str | None] = mapped_column(ForeignKey("action_proposals.id"), nullable=True)
    # skipped, never sent: a PRE code at approval, or why an undo left it (BULK-4, BULK-8)
    skip_code: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()


class BulkCap(Base):
    """Items per batch a role may take, set by a four-eyes change (BULK-5); a role
    without a row has `app.domain.bulk.batch.DEFAULT_CAP`."""

    __tablename__ = "bulk_caps"

    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), primary_key=True)
    role: Mapped[str] = mapped_column(String(50), primary_key=True)
    max_items: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = updated_at_column()
