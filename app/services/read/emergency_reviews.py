"""What pages show of emergency actions and their retrospective reviews (SPEC POL-6):
the reviews list (open first, overdue first, by due time), the overdue count that
Operations and the metrics show, a proposal's review, and who may act or review."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, select

from app.domain import emergency_action as rules
from app.domain.clock import utcnow
from app.extensions import db
from app.models import ActionProposal, EmergencyReview, OperatorUser
from app.services.lifecycle.maker_lookup import makers_of

R = EmergencyReview


@dataclass(frozen=True)
class ReviewRow:
    review: EmergencyReview
    proposal: ActionProposal
    acted_by: str  # the actor's display name
    reviewed_by: str | None
    overdue: bool


def _names(ids) -> dict[str, str]:
    ids = {i for i in ids if i}
    if not ids:
        return {}
    rows = db.session.execute(select(OperatorUser.id, OperatorUser.display_name).where(OperatorUser.id.in_(ids)))
    return {id: name for id, name in rows}


def review_rows(
    installation_id: str, *, open_only: bool = False, limit: int = 200, now: datetime | None = None
) -> list[ReviewRow]:
    """The installation's emergency reviews: open ones first (overdue first, then by
    due time), then the reviewed ones, newest first (POL-6)."""
    now = now or utcnow()
    statement = (
        select(R, ActionProposal)
        .join(ActionProposal, ActionProposal.id == R.proposal_id)
        .where(R.installation_id == installation_id)
        .order_by(case((R.state == rules.ReviewState.OPEN.value, 0), else_=1), R.due_at, R.reviewed_at.desc())
        .limit(limit)
    )
    if open_only:
        statement = statement.where(R.state == rules.ReviewState.OPEN.value)
    pairs = db.session.execute(statement).all()
    open_rows = [pair for pair in pairs if pair[0].state == rules.ReviewState.OPEN.value]
    closed = [pair for pair in pairs if pair[0].state != rules.ReviewState.OPEN.value]
    closed.sort(key=lambda pair: pair[0].reviewed_at or pair[0].acted_at, reverse=True)
    names = _names([r.acted_by for r, _ in pairs] + [r.reviewer_id for r, _ in pairs])
    return [
        ReviewRow(r, p, names.get(r.acted_by, "someone no longer listed"), names.get(r.reviewer_id),
                  rules.is_overdue(r.state, r.due_at, now))
        for r, p in open_rows + closed
    ]


def overdue_rows(installation_id: str, now: datetime | None = None) -> list[ReviewRow]:
    """Open reviews past their due time, the most overdue first (POL-6)."""
    now = now or utcnow()
    return [row for row in review_rows(installation_id, open_only=True, now=now) if row.overdue]


def overdue_count(now: datetime, installation_id: str | None = None) -> int:
    """How many retrospective reviews are overdue (all installations when None; POL-6)."""
    statement = select(func.count()).select_from(R).where(R.state == rules.ReviewState.OPEN.value, R.due_at <= now)
    if installation_id is not None:
        statement = statement.where(R.installation_id == installation_id)
    return db.session.scalar(statement) or 0


@dataclass(frozen=True)
class EmergencyPanel:
    """The proposal page's emergency panel: the review (None before any emergency),
    whether the viewer may act alone now, whether they may review and why not."""

    review: EmergencyReview | None
    acted_by: str | None
    reviewed_by: str | None
    overdue: bool
    can_act: bool
    can_review: bool
    review_refusal: str | None


def emergency_panel(operator: OperatorUser, proposal: ActionProposal, now: datetime | None = None) -> EmergencyPanel:
    """What the proposal page offers and shows of POL-6 for `operator`."""
    now = now or utcnow()
    # only an emergency action has a review: an ordinary proposal's page reads nothing more
    review = db.session.scalar(select(R).where(R.proposal_id == proposal.id)) if proposal.emergency else None
    can_act = (
        review is None
        and rules.may_act_alone(operator.roles)
        and proposal.state == "approval_required"
        and not proposal.bulk_batch_id
    )
    refusal = None
    if review is not None:
        makers = makers_of(db.session, proposal)
        refusal = rules.review_refusal(operator.id, operator.roles, review.acted_by, makers, review.state)
    names = _names([review.acted_by, review.reviewer_id]) if review is not None else {}
    return EmergencyPanel(
        review=review,
        acted_by=names.get(review.acted_by) if review is not None else None,
        reviewed_by=names.get(review.reviewer_id) if review is not None else None,
        overdue=bool(review) and rules.is_overdue(review.state, review.due_at, now),
        can_act=can_act,
        can_review=review is not None and refusal is None,
        review_refusal=refusal,
    )


def proposal_of_review(installation_id: str, review_id: str) -> str | None:
    """The proposal an emergency review is of, within the installation (else None)."""
    return db.session.scalar(select(R.proposal_id).where(R.id == review_id, R.installation_id == installation_id))
