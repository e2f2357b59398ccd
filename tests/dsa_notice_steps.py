"""Steps of the DSA-4 notice tests: a restriction applied through the world's real
flow, its statement row as DSA-2 writes it, and `send_notice` as the applied
receipt's transaction calls it."""

from __future__ import annotations

from datetime import timedelta

from app.domain.dsa import build_statement, puid_for
from app.models import ActionProposal, DsaStatement, new_id
from app.services.dsa.notices import send_notice
from app.services.dsa.settings import current_settings
from app.services.lifecycle.dispatch import deliver
from app.services.uow import unit_of_work
from tests.builders import approve, decide_report, reload
from tests.dsa_examples import facts

AUTHOR = "user:4412"  # the author of post:1001, the first demo report's target


def applied_removal(world, platform) -> ActionProposal:
    """The demo's takedown of post:1001, decided, approved and applied."""
    proposal = decide_report(world)
    approve(world, proposal)
    assert deliver(proposal.id).state == "applied"
    assert platform.state.content["post:1001"] == "removed"
    return reload(proposal)


def statement_for(proposal: ActionProposal, language: str = "de") -> str:
    """A statement row for the applied restriction, as DSA-2 writes it."""
    body = build_statement(
        facts(proposal.id, category="STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH",
              application_date=proposal.confirmed_at.date())
    )
    with unit_of_work() as uow:
        row = DsaStatement(
            id=new_id("sor"),
            installation_id=proposal.installation_id,
            proposal_id=proposal.id,
            puid=puid_for(proposal.id),
            statement=body,
            restriction="visibility",
            restriction_type="DECISION_VISIBILITY_CONTENT_REMOVED",
            language=language,
            applied_at=proposal.confirmed_at,
            complaint_until=proposal.confirmed_at + timedelta(days=183),
        )
        uow.session.add(row)
        uow.commit()
        return row.id


def notify(proposal_id: str, statement_id: str, settings=None) -> str | None:
    """`send_notice` in a unit of work, as the applied receipt's transaction calls it."""
    with unit_of_work() as uow:
        proposal = uow.session.get(ActionProposal, proposal_id)
        statement = uow.session.get(DsaStatement, statement_id)
        settings = settings or current_settings(uow.session, proposal.installation_id)
        notice = send_notice(uow, proposal, statement, settings)
        uow.commit()
        return notice.id if notice is not None else None


