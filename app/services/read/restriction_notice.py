"""What a proposal's page shows of the DSA notice to the affected user (SPEC §7 DSA-4):
on a restriction, its notice (language, subject, text, its own proposal and state);
on a notice, the restriction it tells the user about."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.domain.dsa_notice import LANGUAGE_NAMES
from app.domain.proposal.notice_action import NOTICE_CREATOR_PREFIX
from app.extensions import db
from app.models import ActionProposal, DsaStatement


@dataclass(frozen=True)
class NoticeView:
    """A restriction's notice as its page shows it (DSA-4).

    Attributes:
        puid: the statement of reasons it is rendered from.
        language: ISO 639-1 code; language_name: its name for people.
        subject, text: the notice as the user receives it (plain text).
        complaint_until: the end of the complaint window (UTC).
        proposal_id, state, confirmed_at: its `notify_user` proposal (None: not queued,
            e.g. no notice component is configured).
    """

    puid: str
    language: str
    language_name: str
    subject: str
    text: str
    complaint_until: datetime | None
    proposal_id: str | None
    state: str | None
    confirmed_at: datetime | None


def restriction_notice(statement: DsaStatement | None) -> NoticeView | None:
    """The notice of a restriction whose statement of reasons is `statement` (DSA-4),
    the row the page already read (`read.dsa_statements.statement_of`); None when the
    proposal has no statement. One indexed read (the notice's proposal).

    Args:
        statement: the proposal's statement of reasons, or None.
    """
    if statement is None:
        return None
    notice = db.session.get(ActionProposal, statement.notice_proposal_id) if statement.notice_proposal_id else None
    payload = notice.payload if notice is not None else {}
    language = payload.get("language") or statement.language
    return NoticeView(
        puid=statement.puid,
        language=language,
        language_name=LANGUAGE_NAMES.get(language, language),
        subject=payload.get("subject") or "",
        text=payload.get("text") or "",
        complaint_until=statement.complaint_until,
        proposal_id=notice.id if notice is not None else None,
        state=notice.state if notice is not None else None,
        confirmed_at=notice.confirmed_at if notice is not None else None,
    )


def noticed_restriction(proposal: ActionProposal) -> str | None:
    """The id of the restriction a `notify_user` proposal tells the user about (DSA-4)."""
    notice = (proposal.approval_policy or {}).get("notice") if isinstance(proposal.approval_policy, dict) else None
    if notice is None:
        return None
    return proposal.created_by_id.removeprefix(NOTICE_CREATOR_PREFIX) if proposal.created_by_id else None
