"""Approval policies' records (SPEC POL-1..7): each person's vote on a proposal or a
bulk batch, the installation's policy settings, protected subjects, emergency actions'
retrospective reviews and the notices sent to approvers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column, json_column


class ApprovalVote(Base):
    """One person's approval or rejection of a proposal (or of a bulk batch), bound to
    the digest they saw and counting until `expires_at` (POL-1, POL-2). The proposal's
    one decision (`ActionApproval`) is written when the votes release or veto it."""

    __tablename__ = "approval_votes"
    __table_args__ = (
        UniqueConstraint("approver_id", "idempotency_key"),
        Index("ix_approval_votes_proposal", "proposal_id", "created_at"),
        Index("ix_approval_votes_batch", "batch_id", "created_at"),
    )

    id: Mapped[str] = id_column("vot")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str | None] = mapped_column(ForeignKey("action_proposals.id"), nullable=True)
    batch_id: Mapped[str | None] = mapped_column(ForeignKey("bulk_batches.id"), nullable=True)
    approver_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    decision: Mapped[str] = mapped_column(String(20))  # approved, rejected
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    payload_digest: Mapped[str] = mapped_column(String(100))
    batch_digest: Mapped[str | None] = mapped_column(String(100), nullable=True)
    policy_key: Mapped[str | None] = mapped_column(String(100), nullable=True)  # counted under, when cast
    factor_key: Mapped[str | None] = mapped_column(String(100), nullable=True)
    idempotency_key: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ApprovalSettingsVersion(Base):
    """An installation's approval policies and routes, one row per approved change
    (FOUR-4); the newest is in force. `settings` is `settings_to_json`'s document."""

    __tablename__ = "approval_settings_versions"
    __table_args__ = (UniqueConstraint("installation_id", "version"),)

    id: Mapped[str] = id_column("aps")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    version: Mapped[int] = mapped_column()
    settings: Mapped[dict[str, Any]] = json_column("settings_json")
    settings_digest: Mapped[str] = mapped_column(String(100))
    change_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()


class ProtectedSubject(Base):
    """A subject whose actions route to the protected policy (POL-4): an account
    (`kind` ``account``, its reference e.g. ``user:5120``), or every target by an
    author (``author``). Marked and unmarked by four-eyes changes; unmarking sets
    `unmarked_at` (the row stays for the record)."""

    __tablename__ = "protected_subjects"
    __table_args__ = (Index("ix_protected_subjects_lookup", "installation_id", "subject_reference"),)

    id: Mapped[str] = id_column("prs")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    kind: Mapped[str] = mapped_column(String(20))  # account, author
    subject_reference: Mapped[str] = mapped_column(String(500))
    reason: Mapped[str] = mapped_column(Text)
    marked_change_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    marked_at: Mapped[datetime] = created_at_column()
    unmarked_change_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    unmarked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class EmergencyReview(Base):
    """The retrospective review of an emergency action (POL-6): due by `due_at`;
    ``open`` until a second person agrees or disagrees (which proposes the
    compensation, `compensation_proposal_id`)."""

    __tablename__ = "emergency_reviews"
    __table_args__ = (Index("ix_emergency_reviews_due", "installation_id", "state", "due_at"),)

    id: Mapped[str] = id_column("emr")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"), unique=True)
    acted_by: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    reason: Mapped[str] = mapped_column(Text)
    acted_at: Mapped[datetime] = created_at_column()
    due_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(20), default="open")  # open, agreed, disagreed
    reviewer_id: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    reviewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    review_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    compensation_proposal_id: Mapped[str | None] = mapped_column(String(700), nullable=True)


class ApprovalNotice(Base):
    """A notice to an eligible approver that a proposal (or batch) waits for them, by
    `channel` (``email``, ``webhook``); at most one per subject, person and channel
    (POL-7). Sent through this outbox: ``pending`` until `sent_at`."""

    __tablename__ = "approval_notices"
    __table_args__ = (
        UniqueConstraint("subject_id", "operator_id", "channel"),
        Index("ix_approval_notices_pending", "state", "available_at"),
    )

    id: Mapped[str] = id_column("ntc")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    subject_id: Mapped[str] = mapped_column(String(700))  # a proposal or bulk batch id
    operator_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    channel: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20), default="pending")  # pending, sent, failed
    attempts: Mapped[int] = mapped_column(default=0)
    available_at: Mapped[datetime] = created_at_column()
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = created_at_column()
