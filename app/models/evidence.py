"""The platform's evidence about a reported target, stored once (SPEC REV-1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column, json_column
from .cases import AppealCorrection, ReportTarget
from .proposals import ActionProposal

# Indexes that serve the review pages, declared here beside the evidence so the other
# model modules stay as they were: other reports on the same target (REV-2), and what
# undid an action (REV-4).
Index("ix_report_targets_subject", ReportTarget.installation_id, ReportTarget.target_reference)
Index("ix_action_proposals_compensates", ActionProposal.compensates_proposal_id)
Index("ix_appeal_corrections_original", AppealCorrection.original_proposal_id)


class ReportEvidence(Base):
    """What a target looked like when it was reported: immutable (the database
    refuses UPDATE but the erasure of its personal fields, OPS-4), named by its digest."""

    __tablename__ = "report_evidence"
    __table_args__ = (
        # subject history: other reports on the same author (REV-2)
        Index("ix_report_evidence_author", "installation_id", "author_reference"),
    )

    id: Mapped[str] = id_column("evd")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    report_id: Mapped[str] = mapped_column(ForeignKey("reports.id"), index=True)
    report_target_id: Mapped[str] = mapped_column(ForeignKey("report_targets.id"), unique=True)
    target_reference: Mapped[str] = mapped_column(String(500))
    content_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    author_reference: Mapped[str | None] = mapped_column(String(500), nullable=True)
    author_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    media: Mapped[list[dict[str, Any]]] = json_column("media_json", default=list)  # [{url, sha256, mime_type}]
    permalink: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    language: Mapped[str | None] = mapped_column(String(2), nullable=True)  # ISO 639-1, lower case (DSA-4)
    evidence_digest: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = created_at_column()
    # OPS-4: the one UPDATE the database allows empties the personal fields and sets these
    erased_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    erased_reason: Mapped[str | None] = mapped_column(String(20), nullable=True)  # request, retention
