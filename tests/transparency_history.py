"""A known history for the transparency report's tests (SPEC DSA-6): statements of
reasons and appeals inserted as rows with chosen values and times, around the period
November 2026 (UTC), with rows just outside it on both sides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, select

from app.domain.dsa_answers import StatementState
from app.extensions import db
from app.models import ActionProposal, Appeal, AppealDecision, Decision, DsaStatement, new_id

from .builders import decide_report

NOVEMBER = ("2026-11-01", "2026-12-01")
H = "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH"
SCAM = "STATEMENT_CATEGORY_SCAMS_AND_FRAUD"
VIOLENCE = "STATEMENT_CATEGORY_VIOLENCE"
MINORS = "STATEMENT_CATEGORY_PROTECTION_OF_MINORS"
INCOMPATIBLE, ILLEGAL = "DECISION_GROUND_INCOMPATIBLE_CONTENT", "DECISION_GROUND_ILLEGAL_CONTENT"
REMOVED, DEMOTED = "DECISION_VISIBILITY_CONTENT_REMOVED", "DECISION_VISIBILITY_CONTENT_DEMOTED"
NOT, FULLY, PARTLY = "AUTOMATED_DECISION_NOT_AUTOMATED", "AUTOMATED_DECISION_FULLY", "AUTOMATED_DECISION_PARTIALLY"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Made:
    """One statement of the history: its counted values, seconds from report to
    action (None: no report) and when it applied."""

    category: str
    ground: str
    restriction: str
    restriction_type: str
    automated_decision: str
    automated_detection: bool
    wait: int | None
    applied_at: datetime


STATEMENTS = [
    Made(H, INCOMPATIBLE, "visibility", REMOVED, NOT, False, 600, at("2026-11-01T00:00:00")),
    Made(H, INCOMPATIBLE, "visibility", REMOVED, FULLY, True, 60, at("2026-11-05T10:00:00")),
    Made(SCAM, INCOMPATIBLE, "account", "DECISION_ACCOUNT_SUSPENDED", PARTLY, True, 3600, at("2026-11-10T08:00:00")),
    Made(SCAM, ILLEGAL, "account", "DECISION_ACCOUNT_TERMINATED", NOT, False, 86400, at("2026-11-15T12:00:00")),
    Made(VIOLENCE, ILLEGAL, "provision", "DECISION_PROVISION_PARTIAL_SUSPENSION", NOT, False, 120,
         at("2026-11-20T09:30:00")),
    Made(MINORS, ILLEGAL, "provision", "DECISION_PROVISION_TOTAL_SUSPENSION", FULLY, True, None,
         at("2026-11-25T18:00:00")),
    Made(H, INCOMPATIBLE, "monetary", "DECISION_MONETARY_SUSPENSION", PARTLY, False, 1800, at("2026-11-30T23:59:59")),
    Made(H, INCOMPATIBLE, "visibility", DEMOTED, NOT, False, 300, at("2026-11-12T07:00:00")),
    # outside November: a second before it, and its end (not included)
    Made(SCAM, INCOMPATIBLE, "account", "DECISION_ACCOUNT_SUSPENDED", FULLY, True, 5,
         at("2026-10-31T23:59:59")),
    Made(VIOLENCE, ILLEGAL, "provision", "DECISION_PROVISION_TOTAL_SUSPENSION", NOT, False, 7,
         at("2026-12-01T00:00:00")),
]

# (filed, decided or None, outcome or None)
APPEALS = [
    (at("2026-10-20T00:00:00"), at("2026-11-03T00:00:00"), "upheld"),  # decided in November only
    (at("2026-11-02T00:00:00"), at("2026-11-02T02:00:00"), "reversed"),
    (at("2026-11-10T00:00:00"), at("2026-11-11T00:00:00"), "modified"),
    (at("2026-11-28T00:00:00"), None, None),  # still open
    (at("2026-11-29T00:00:00"), at("2026-12-01T00:00:00"), "reversed"),  # decided after November
    (at("2026-09-01T00:00:00"), at("2026-10-01T00:00:00"), "upheld"),  # neither
    (at("2026-11-30T12:00:00"), at("2026-11-30T12:30:00"), "reversed"),
]


def build_history(world) -> None:
    """Insert `STATEMENTS` (each on its own copy of a real proposal) and `APPEALS`
    (against a real decision) into the world's installation."""
    first = decide_report(world)
    table = ActionProposal.__table__
    row = dict(db.session.execute(select(table).where(table.c.id == first.id)).mappings().one())
    ids = [f"{first.id}-t{n}" for n in range(len(STATEMENTS))]
    db.session.execute(
        insert(table), [{**row, "id": pid, "operation_id": f"{row['operation_id']}-t{n}"} for n, pid in enumerate(ids)]
    )
    db.session.execute(
        insert(DsaStatement),
        [
            {
                "id": new_id("sor"),
                "installation_id": world.installation_id,
                "proposal_id": pid,
                "puid": f"sor-t{n}",
                "statement": {"puid": f"sor-t{n}"},
                "state": StatementState.PENDING.value,
                "attempts": 0,
                "category": made.category,
                "ground": made.ground,
                "restriction": made.restriction,
                "restriction_type": made.restriction_type,
                "automated_decision": made.automated_decision,
                "automated_detection": made.automated_detection,
                "source_type": "SOURCE_ARTICLE_16",
                "reported_at": None if made.wait is None else made.applied_at - timedelta(seconds=made.wait),
                "applied_at": made.applied_at,
                "complaint_until": made.applied_at + timedelta(days=183),
                "created_at": made.applied_at,
                "updated_at": made.applied_at,
            }
            for n, (pid, made) in enumerate(zip(ids, STATEMENTS, strict=True))
        ],
    )
    decision = db.session.scalar(select(Decision).where(Decision.report_id == world.report_ids[0]))
    for filed, decided, outcome in APPEALS:
        appeal_id = new_id("apl")
        db.session.execute(
            insert(Appeal).values(
                id=appeal_id, installation_id=world.installation_id, report_id=decision.report_id,
                decision_id=decision.id, state="decided" if decided else "open", created_at=filed, updated_at=filed,
            )
        )
        if decided:
            db.session.execute(
                insert(AppealDecision).values(
                    id=new_id("apd"), installation_id=world.installation_id, appeal_id=appeal_id, outcome=outcome,
                    maker_id=world.users["reviewer"], rationale="r", completion_state="completed",
                    created_at=decided, updated_at=decided,
                )
            )
    db.session.commit()
