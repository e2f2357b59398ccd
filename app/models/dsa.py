"""Statements of reasons for the DSA Transparency Database (SPEC §7 DSA-2, DSA-3),
one row per applied restriction, and their one guarded move.

A statement's state changes only through `move_statements`: one conditional UPDATE
that matches while the row is in one of the move's from-states
(`app.domain.dsa_answers.DSA_STATEMENT`) and still held by the submitter's claim, so
two submitters racing for the same rows cannot both record an outcome. A reversal on
appeal is written by `mark_reversed`, one UPDATE guarded on ``reversed_at`` (DSA-5).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Select,
    String,
    Text,
    UniqueConstraint,
    and_,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.domain.clock import utcnow
from app.domain.dsa_answers import DSA_STATEMENT, StatementState

from .base import Base, UTCDateTime, created_at_column, id_column, json_column, updated_at_column


class DsaStatement(Base):
    """A restriction's statement of reasons and its submission (DSA-2, DSA-3).

    `statement` is the API body (`app.domain.dsa.build_statement`); `puid` is unique
    per installation, so a proposal yields one statement. While a submitter holds
    it, `claim_token` names the submitter's batch and `claimed_until` the lease.
    """

    __tablename__ = "dsa_statements"
    __table_args__ = (
        UniqueConstraint("installation_id", "puid"),
        Index("ix_dsa_statements_pending", "installation_id", "state", "created_at"),
        Index("ix_dsa_statements_proposal", "proposal_id"),
        Index("ix_dsa_statements_applied", "installation_id", "applied_at"),
    )

    id: Mapped[str] = id_column("sor")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    proposal_id: Mapped[str] = mapped_column(ForeignKey("action_proposals.id"))
    puid: Mapped[str] = mapped_column(String(500))
    statement: Mapped[dict[str, Any]] = json_column("statement_json")
    state: Mapped[str] = mapped_column(String(20), default=StatementState.PENDING.value)
    attempts: Mapped[int] = mapped_column(default=0)  # batches it was sent in
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(100), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    tdb_uuid: Mapped[str | None] = mapped_column(String(100), nullable=True)  # the database's id, when created
    submitted_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # What the transparency report counts (DSA-6), copied from the statement when built
    report_id: Mapped[str | None] = mapped_column(ForeignKey("reports.id"), nullable=True)
    decision_id: Mapped[str | None] = mapped_column(ForeignKey("decisions.id"), nullable=True)
    category: Mapped[str] = mapped_column(String(100), default="")
    ground: Mapped[str] = mapped_column(String(60), default="")
    restriction: Mapped[str] = mapped_column(String(20), default="")  # dsa.Restriction
    restriction_type: Mapped[str] = mapped_column(String(100), default="")
    automated_decision: Mapped[str] = mapped_column(String(60), default="")
    automated_detection: Mapped[bool] = mapped_column(Boolean, default=False)
    source_type: Mapped[str] = mapped_column(String(60), default="")
    language: Mapped[str] = mapped_column(String(5), default="en")  # the affected user's (DSA-4)
    reported_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # the report received
    applied_at: Mapped[datetime] = mapped_column(UTCDateTime())  # the applied receipt (application date)
    ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # a temporary restriction's end
    complaint_until: Mapped[datetime] = mapped_column(UTCDateTime())  # DSA-5: appeals after this are refused
    notice_proposal_id: Mapped[str | None] = mapped_column(String(700), nullable=True)  # DSA-4: its notify_user
    reversed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # DSA-5
    reversal_appeal_id: Mapped[str | None] = mapped_column(ForeignKey("appeals.id"), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = updated_at_column()


def move_statements(
    session: Session, ids: list[str], move: StrEnum, *, claim_token: str | None = None, values: dict | None = None
) -> set[str]:
    """Apply `move` to the statements `ids` with one guarded UPDATE (DSA-3).

    Args:
        session: the unit of work's session.
        ids: statement ids.
        move: a `StatementMove`.
        claim_token: when given, only rows still held by this claim move (and the
            claim is released).
        values: other attributes set in the same UPDATE, by attribute name.

    Returns:
        The ids that moved; the others were in none of the move's from-states or
        no longer held by the claim (nothing written for them).

    Raises:
        TypeError: `move` is not a statement's move, or `values` names the state.
    """
    if "state" in (values or {}):
        raise TypeError("a move writes the state from its table")
    sources = [state.value for state in DSA_STATEMENT.sources(move)]
    written: dict[str, Any] = {"state": DSA_STATEMENT.target(move).value, "updated_at": utcnow(), **(values or {})}
    where = [DsaStatement.state.in_(sources)]
    if claim_token is not None:
        where.append(DsaStatement.claim_token == claim_token)
        written.update(claim_token=None, claimed_until=None)
    moved: set[str] = set()
    for start in range(0, len(ids), 500):
        statement = (
            update(DsaStatement)
            .where(DsaStatement.id.in_(ids[start : start + 500]), *where)
            .values({getattr(DsaStatement, name): value for name, value in written.items()})
            .returning(DsaStatement.id)
            .execution_options(synchronize_session=False)
        )
        moved.update(session.scalars(statement))
    return moved


def _enforcing_proposals(report_id: str, decision_id: str) -> Select:
    """Ids of the actions that enforced `decision_id` on `report_id`: pinned to it or
    made by a run it started, neither an appeal's correction nor a compensation (the
    actions `app.services.cases.appeals` corrects on appeal)."""
    from .proposals import ActionProposal
    from .workflows import WorkflowRun

    started_by_it = select(WorkflowRun.id).where(WorkflowRun.decision_id == decision_id)
    return select(ActionProposal.id).where(
        ActionProposal.report_id == report_id,
        or_(
            ActionProposal.decision_id == decision_id,
            and_(ActionProposal.decision_id.is_(None), ActionProposal.run_id.in_(started_by_it)),
        ),
        ActionProposal.appeal_id.is_(None),
        ActionProposal.compensates_proposal_id.is_(None),
    )


def _of_decision(installation_id: str, report_id: str, decision_id: str) -> list:
    return [
        DsaStatement.installation_id == installation_id,
        DsaStatement.proposal_id.in_(_enforcing_proposals(report_id, decision_id)),
    ]


def complaint_window_end(session: Session, installation_id: str, report_id: str, decision_id: str) -> datetime | None:
    """Until when the decision `decision_id` on `report_id` may be appealed (DSA-5):
    the latest ``complaint_until`` of the statements of reasons of the actions that
    enforced it; None when it has none (DSA off, or nothing restricted). One query.

    Returns:
        An aware UTC datetime, or None.
    """
    return session.scalar(
        select(func.max(DsaStatement.complaint_until)).where(*_of_decision(installation_id, report_id, decision_id))
    )


def latest_statement(session: Session, installation_id: str, report_id: str, decision_id: str) -> DsaStatement | None:
    """The newest statement of reasons (by application time) of the actions that
    enforced `decision_id` on `report_id` (DSA-4, DSA-5); None when there is none."""
    return session.scalar(
        select(DsaStatement)
        .where(*_of_decision(installation_id, report_id, decision_id))
        .order_by(DsaStatement.applied_at.desc(), DsaStatement.id.desc())
        .limit(1)
    )


def mark_reversed(
    session: Session, installation_id: str, report_id: str, decision_id: str, *, appeal_id: str, at: datetime
) -> list[str]:
    """Record on the statements of reasons of the actions that enforced `decision_id`
    that an appeal reversed it (DSA-5): one UPDATE guarded on ``reversed_at IS NULL``,
    so a statement keeps its first reversal and a repeat writes nothing.

    Args:
        session: the unit of work's session (the appeal decision's transaction).
        installation_id, report_id, decision_id: the contested decision.
        appeal_id: the appeal decided ``reversed``.
        at: the appeal decision's time (aware UTC).

    Returns:
        The ids of the statements written now, sorted.
    """
    statement = (
        update(DsaStatement)
        .where(*_of_decision(installation_id, report_id, decision_id), DsaStatement.reversed_at.is_(None))
        .values(reversed_at=at, reversal_appeal_id=appeal_id, updated_at=at)
        .returning(DsaStatement.id)
        .execution_options(synchronize_session=False)
    )
    return sorted(session.scalars(statement))


class DsaSettingsVersion(Base):
    """An installation's DSA settings, one row per approved change (DSA-1, FOUR-4); the
    newest is in force. `settings` is `app.domain.dsa_settings.settings_to_json`'s
    document."""

    __tablename__ = "dsa_settings_versions"
    __table_args__ = (UniqueConstraint("installation_id", "version"),)

    id: Mapped[str] = id_column("dss")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    version: Mapped[int] = mapped_column()
    settings: Mapped[dict[str, Any]] = json_column("settings_json")
    settings_digest: Mapped[str] = mapped_column(String(100))
    change_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = created_at_column()
