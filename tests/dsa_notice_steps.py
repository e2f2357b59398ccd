"""Steps of the DSA-4 notice tests, through the real flow: a restriction decided,
approved and applied on the demo platform, whose applied receipt's transaction
builds the statement of reasons (DSA-2) and queues the affected user's notice
(`app/services/dsa/applied.py`). The tests read what that flow wrote, and call
`send_notice` again only to prove it is exactly once."""

from __future__ import annotations

from sqlalchemy import select

from app.demo_platform import DEMO_CONTENT
from app.extensions import db
from app.models import ActionProposal, DsaStatement
from app.services.dsa.notices import notice_of, send_notice
from app.services.dsa.settings import current_settings
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work
from tests.builders import add_report_with_evidence, approve, decide, decide_report, reload

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target


def report_in(world, language: str) -> str:
    """A report of post:1001 whose evidence (the platform's post, its author and time)
    says the content is in `language` (ISO 639-1); its id."""
    post = DEMO_CONTENT["post:1001"]
    return add_report_with_evidence(
        world, f"notice-{language}", "post:1001", content_text=post["text"],
        author_reference=post["author_reference"], author_name=post["author_name"],
        posted_at=post["posted_at"], language=language,
    )


def applied_removal(world, platform, language: str | None = None) -> ActionProposal:
    """The demo's takedown of post:1001, decided, approved and applied. With
    `language`, the report decided is one whose evidence is in that language (the
    statement's, hence the notice's, language); otherwise the first demo report (no
    language: the settings' default)."""
    proposal = decide(world, report_in(world, language)) if language else decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    assert platform.state.content["post:1001"] == "removed"
    return reload(proposal)


def statement_of(proposal: ActionProposal) -> DsaStatement:
    """The statement of reasons the applied receipt's transaction built (DSA-2)."""
    db.session.rollback()
    return db.session.scalar(select(DsaStatement).where(DsaStatement.proposal_id == proposal.id))


def queued_notice(proposal: ActionProposal) -> ActionProposal | None:
    """The notify_user proposal the applied receipt's transaction queued, if any."""
    db.session.rollback()
    return notice_of(db.session, proposal)


def notify(proposal_id: str, settings=None) -> str | None:
    """`send_notice` again, in a unit of work as the applied receipt's transaction
    calls it, for the restriction's own statement; the notice's id or None."""
    with unit_of_work() as uow:
        proposal = uow.session.get(ActionProposal, proposal_id)
        statement = uow.session.scalar(select(DsaStatement).where(DsaStatement.proposal_id == proposal_id))
        settings = settings or current_settings(uow.session, proposal.installation_id)
        notice = send_notice(uow, proposal, statement, settings)
        uow.commit()
        return notice.id if notice is not None else None
