"""What Operations and the proposal page show of statements of reasons (SPEC §7
DSA-3): how many wait, went in or were refused, each refusal with the Transparency
Database's own errors in words, whether anything can be sent now (the connection,
a hold after the database asked to wait), and one proposal's statement."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select

from app.domain.dsa_answers import StatementState
from app.domain.dsa_submission_words import refusal_lines, submission_words
from app.models import ActionProposal, DsaStatement
from app.services.dsa.connection import EndpointStatus, endpoint_status
from app.services.dsa.settings import current_settings
from app.services.dsa.sweep import Hold, hold_of

DEAD_LIMIT = 50


@dataclass(frozen=True)
class DeadStatement:
    """A refused statement as listed: the row, its proposal's action code, and its
    refusal as (field in words, message) lines."""

    statement: DsaStatement
    action_code: str | None
    lines: list[tuple[str, str]]


@dataclass
class StatementsOverview:
    """The "Statements of reasons" section of Operations (DSA-3).

    Attributes:
        enabled: whether the installation's DSA settings are on.
        counts: statements by state (``pending``, ``submitted``, ``dead_letter``).
        dead: the oldest refused statements, at most `DEAD_LIMIT`.
        connection: where statements would go now (None while DSA is off).
        hold: the wait the database asked for, if any.
    """

    enabled: bool
    counts: dict[str, int] = field(default_factory=dict)
    dead: list[DeadStatement] = field(default_factory=list)
    connection: EndpointStatus | None = None
    hold: Hold | None = None

    @property
    def shown(self) -> bool:
        """Operations shows the section while DSA is on or any statement exists."""
        return self.enabled or any(self.counts.values())

    @property
    def hold_words(self) -> str | None:
        """Why submissions wait, in words (None without a hold)."""
        return submission_words(self.hold.error) if self.hold else None


def statements_overview(session, installation_id: str) -> StatementsOverview:
    """Counts, dead letters and the connection's status (DSA-3). At most four
    queries whatever the number of statements, and one Redis read.

    Args:
        session: a database session (read only).
        installation_id: the operator's installation.
    """
    settings = current_settings(session, installation_id)
    counts = dict(
        session.execute(
            select(DsaStatement.state, func.count())
            .where(DsaStatement.installation_id == installation_id)
            .group_by(DsaStatement.state)
        ).all()
    )
    overview = StatementsOverview(
        enabled=settings.enabled, counts={state.value: counts.get(state.value, 0) for state in StatementState}
    )
    if overview.counts[StatementState.DEAD_LETTER.value]:
        rows = session.execute(
            select(DsaStatement, ActionProposal.action_code)
            .outerjoin(ActionProposal, ActionProposal.id == DsaStatement.proposal_id)
            .where(
                DsaStatement.installation_id == installation_id,
                DsaStatement.state == StatementState.DEAD_LETTER.value,
            )
            .order_by(DsaStatement.updated_at, DsaStatement.id)
            .limit(DEAD_LIMIT)
        ).all()
        overview.dead = [DeadStatement(row, code, refusal_lines(row.last_error)) for row, code in rows]
    if settings.enabled:
        overview.connection = endpoint_status(session, installation_id, settings)
        overview.hold = hold_of(installation_id)
    return overview


def statement_of(session, proposal_id: str) -> DsaStatement | None:
    """The statement of reasons of one proposal's restriction, if one was built
    (DSA-2, DSA-3). One indexed query."""
    return session.scalar(
        select(DsaStatement).where(DsaStatement.proposal_id == proposal_id).order_by(DsaStatement.created_at).limit(1)
    )


def statement_in(session, installation_id: str, statement_id: str) -> DsaStatement | None:
    """The statement `statement_id` of `installation_id`, else None (DSA-3)."""
    return session.scalar(
        select(DsaStatement).where(
            DsaStatement.id == str(statement_id)[:200], DsaStatement.installation_id == installation_id
        )
    )


def why_pending_waits(session, statement: DsaStatement | None) -> str | None:
    """Why a pending statement cannot be sent now, in words, or None when the sweep
    can send it (DSA-3): the proposal page says so instead of promising the next
    batch. At most two queries, only for a pending statement.

    Args:
        session: a database session (read only).
        statement: the proposal's statement (`statement_of`), or None.

    Returns:
        The connection's problem as Operations words it (e.g. "the DSA settings name no
        connection for the Transparency Database."), or None.
    """
    if statement is None or statement.state != StatementState.PENDING.value:
        return None
    settings = current_settings(session, statement.installation_id)
    return endpoint_status(session, statement.installation_id, settings).problem_words
