"""What a reviewer approves, in words (SPEC FOUR-5): where the action goes and how its
answer is read (`app.domain.proposal.destination.in_words`), and whose decision it
enforces and why ("Remove content — by Maya Moderator — “threat of harm …”"), or for a
compensation, an appeal correction or a change of a temporary action's end, who
proposed it and why.

One query for any number of proposals (the approval task list and the proposal page).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from app.domain.proposal.destination import DeliveryWords, host_of, in_words
from app.extensions import db
from app.models import ActionProposal, AppealCorrection, AppealDecision, Decision, OperatorUser, WorkflowRun

P = ActionProposal
# Built once: an alias of a wide entity costs milliseconds to build and adapt on every
# request, and these are pure (the statement cache then finds the same query each time).
MAKER, APPEAL_MAKER, CREATOR = aliased(OperatorUser), aliased(OperatorUser), aliased(OperatorUser)
ORIGINAL = aliased(P)
SHORT_REASON = 120  # characters of a rationale on the task list


def shorten(text: str, limit: int) -> str:
    """`text` cut at a word to at most `limit` characters, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:.") + " …"


@dataclass(frozen=True)
class MakerLine:
    """Whose decision or proposal a reviewer approves, and why (FOUR-5).

    Attributes:
        label: the decision's label (``Remove content``), or ``Compensation``,
            ``Appeal correction``, ``End now`` / ``Extend``.
        verb: ``by``, ``proposed by``, ``decided on appeal by``.
        name: the person's display name (platform text: shown inside <bdi>).
        quote: their own words (rationale), shown quoted inside <bdi>; None when none.
        note: the console's words about it (``undoes Take the content down``).
    """

    label: str
    verb: str
    name: str | None
    quote: str | None = None
    note: str | None = None

    def short_quote(self, limit: int = SHORT_REASON) -> str | None:
        """The rationale shortened for the task list."""
        return shorten(self.quote, limit) if self.quote else None

    def text(self, limit: int | None = None) -> str:
        """The line as plain text: ``Remove content — by Maya Moderator — “threat of harm …”``."""
        parts = [self.label, f"{self.verb} {self.name or 'someone no longer listed'}"]
        quote = self.short_quote(limit) if limit else (" ".join(self.quote.split()) if self.quote else None)
        if quote:
            parts.append(f"“{quote}”")
        if self.note:
            parts.append(self.note)
        return " — ".join(parts)


@dataclass(frozen=True)
class Approving:
    """What the reviewer of one proposal approves (FOUR-5)."""

    delivery: DeliveryWords | None  # None for a proposal prepared before FOUR-5
    host: str | None
    maker: MakerLine | None
    reversal: DeliveryWords | None = None  # a temporary action's scheduled reversal (TEMP-1)


def approving(
    proposals: Iterable[ActionProposal | None], label: Callable[[str, str | None], str]
) -> dict[str, Approving]:
    """For each proposal: its delivery in words and the decision or proposal behind it
    (FOUR-5; one query whatever their number).

    Args:
        proposals: proposal rows (None entries are skipped).
        label: ``label(kind, code)`` giving the installation's words for a code (REV-3).

    Returns:
        Proposal id -> `Approving`.
    """
    rows = {p.id: p for p in proposals if p is not None}
    if not rows:
        return {}
    maker, appeal_maker, creator, original = MAKER, APPEAL_MAKER, CREATOR, ORIGINAL
    found = db.session.execute(
        select(
            P.id,
            Decision.decision_code,
            Decision.rationale,
            maker.display_name,
            AppealDecision.outcome,
            AppealDecision.rationale,
            AppealDecision.rationale_redacted_at,
            appeal_maker.display_name,
            creator.display_name,
            original.action_code,
        )
        .outerjoin(WorkflowRun, WorkflowRun.id == P.run_id)
        .outerjoin(Decision, Decision.id == func.coalesce(P.decision_id, WorkflowRun.decision_id))
        .outerjoin(maker, maker.id == Decision.maker_id)
        .outerjoin(AppealCorrection, AppealCorrection.proposal_id == P.id)
        .outerjoin(AppealDecision, AppealDecision.id == AppealCorrection.appeal_decision_id)
        .outerjoin(appeal_maker, appeal_maker.id == AppealDecision.maker_id)
        .outerjoin(creator, creator.id == P.created_by_id)
        .outerjoin(original, original.id == func.coalesce(P.compensates_proposal_id, P.reverses_proposal_id))
        .where(P.id.in_(set(rows)))
    ).all()
    answer = {}
    for pid, code, rationale, maker_name, outcome, ad_rationale, redacted, ad_name, creator_name, undone in found:
        p = rows[pid]
        if p.compensates_proposal_id:
            line = MakerLine("Compensation", "proposed by", creator_name, note=f"undoes {label('action', undone)}")
        elif p.appeal_id:
            note = f"overturns {label('decision', code)}" if code else None
            quote = None if redacted else ad_rationale
            line = MakerLine("Appeal correction", "decided on appeal by", ad_name, quote, note)
        elif p.reverses_proposal_id and p.created_by_type == "operator":
            change = (p.approval_policy or {}).get("temporary_change")
            title = {"end_now": "End now", "extend": "Extend"}.get(change, "Change of end")
            line = MakerLine(title, "proposed by", creator_name, note=f"ends {label('action', undone)}")
        elif code:
            line = MakerLine(label("decision", code), "by", maker_name, rationale or None)
        else:
            line = None
        reversal = ((p.temporary or {}).get("reversal") or {}).get("delivery")
        answer[pid] = Approving(in_words(p.delivery), host_of(p.delivery), line, in_words(reversal))
    return answer
