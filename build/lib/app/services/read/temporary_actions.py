"""What the console shows about temporary and scheduled actions (SPEC TEMP-1..4):
a proposal's plan, countdown and reversals; active temporary actions (Reports);
reversals due soon or overdue (Operations, metric)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import and_, func, select
from sqlalchemy.orm import aliased

from app.domain.clock import utcnow
from app.domain.proposal import temporary as temporary_rules
from app.domain.proposal.delivery import AWAITING_RESULT
from app.domain.states import is_dead_letter, is_terminal
from app.extensions import db
from app.models import ActionProposal

P = ActionProposal
ORIGINAL = aliased(P)  # built once (pure; costly to build per request)
LIMIT = 50
SOON_SECONDS = 24 * 3600
PENDING = sorted(AWAITING_RESULT)  # not ended: waiting, or being sent


@dataclass
class TemporaryView:
    """A proposal's temporary side: its plan and reversals, or the action it reverses."""

    summary: str | None = None  # "suspend_account for 3 minutes, then unsuspend_account"
    plan: dict | None = None
    reversals: list[ActionProposal] = field(default_factory=list)  # newest first
    active: ActionProposal | None = None  # the reversal that will end it
    original: ActionProposal | None = None  # for a reversal: the action it ends
    ends_at: datetime | None = None
    ended: bool = False

    @property
    def reversal_failed(self) -> bool:
        """Its reversal failed for good: the action is still in force until an operator
        retries the reversal or a second person approves ending it now (FOUR-7)."""
        a = self.active
        return self.plan is not None and a is not None and is_dead_letter(a.state, a.delivery_terminal)

    @property
    def in_force(self) -> bool:
        """Applied and not ended yet: the page keeps following it."""
        return self.plan is not None and self.active is not None and not self.ended


def temporary_view(proposal: ActionProposal) -> TemporaryView | None:
    """The temporary side of one proposal, or None when it has none (TEMP-1..3)."""
    if proposal.reverses_proposal_id:
        original = db.session.get(P, proposal.reverses_proposal_id)
        return TemporaryView(original=original, ends_at=proposal.not_before)
    if not proposal.temporary:
        return None
    reversals = list(
        db.session.scalars(
            select(P).where(P.reverses_proposal_id == proposal.id).order_by(P.created_at.desc(), P.id.desc())
        )
    )
    active = next((r for r in reversals if temporary_rules.is_active_reversal(r.state)), None)
    undone = any(r.last_error_code == temporary_rules.UNDONE for r in reversals)
    return TemporaryView(
        summary=temporary_rules.summary(proposal.action_code, proposal.temporary),
        plan=proposal.temporary,
        reversals=reversals,
        active=active,
        ends_at=active.not_before if active else None,
        ended=undone or (active is not None and is_terminal(active.state, active.delivery_terminal)),
    )


def active_temporary_actions(installation_id: str, limit: int = LIMIT) -> list[tuple[ActionProposal, ActionProposal]]:
    """(temporary action, its scheduled reversal) for every action in force, ending soonest
    first (one query)."""
    Original = ORIGINAL
    rows = db.session.execute(
        select(Original, P)
        .join(P, P.reverses_proposal_id == Original.id)
        .where(P.installation_id == installation_id, P.state.in_(PENDING), P.delivery_terminal.is_(False))
        .order_by(P.not_before, P.id)
        .limit(limit)
    ).all()
    return [(original, reversal) for original, reversal in rows]


def _pending_reversals(*where):
    """Reversals not sent and not ended yet."""
    return and_(P.reverses_proposal_id.is_not(None), P.state.in_(PENDING), P.delivery_terminal.is_(False), *where)


def reversals_due(installation_id: str, now: datetime | None = None) -> tuple[list, list]:
    """(due in the next 24 h, overdue) reversals of one installation, soonest first, in one
    query (TEMP-2)."""
    now = now or utcnow()
    overdue_before = now - timedelta(seconds=temporary_rules.OVERDUE_GRACE_SECONDS)
    rows = db.session.scalars(
        select(P)
        .where(
            _pending_reversals(P.installation_id == installation_id),
            P.not_before <= now + timedelta(seconds=SOON_SECONDS),
        )
        .order_by(P.not_before)
        .limit(2 * LIMIT)
    ).all()
    overdue = [p for p in rows if p.not_before <= overdue_before]
    return [p for p in rows if p.not_before > overdue_before], overdue


def overdue_reversal_count(now: datetime) -> int:
    """Reversals still unsent five minutes past their time, every installation (metric)."""
    overdue_before = now - timedelta(seconds=temporary_rules.OVERDUE_GRACE_SECONDS)
    return db.session.scalar(select(func.count()).where(_pending_reversals(P.not_before <= overdue_before)))
