"""The affected user's notice (DSA Art. 17), delivered as a `notify_user` action
(SPEC §7 DSA-4).

`send_notice` runs in the transaction that records the restriction's applied
receipt, right after its statement of reasons is built (`applied.on_applied`): the
notice exists only once the restriction applied. It renders the notice from the
statement (`app.domain.dsa_notice`), creates one `notify_user` proposal following
the restriction under the restriction's approval (`notice_action.notice_proposal`),
and enqueues its delivery after commit. The notice restricts nothing, so its own
applied receipt makes no statement (its component declares no restriction).
"""

from __future__ import annotations

from sqlalchemy import select

from app.domain.dsa_notice import render_notice
from app.domain.dsa_settings import DsaSettings
from app.domain.proposal.notice_action import affected_user, notice_operation_id, notice_payload, notice_proposal
from app.models import ActionProposal, ComponentDefinition, ComponentVersion, DsaStatement, ReportEvidence
from app.queueing import enqueue_delivery
from app.services.lifecycle.action_targets import destination_of
from app.services.lifecycle.proposals import add_inherited_approval, approval_of_digest, insert_proposal, original_facts
from app.services.uow import Actor, UnitOfWork


def notice_component(session, installation_id: str, slug: str | None) -> ComponentVersion | None:
    """The version in force of the installation's notice component (DSA-4): the newest
    unretired version of an active definition with this slug; None when there is none.

    Args:
        session: a session.
        installation_id: the installation.
        slug: the settings' ``notice_component`` (None: notices are not sent).
    """
    if not slug:
        return None
    return session.scalar(
        select(ComponentVersion)
        .join(ComponentDefinition, ComponentDefinition.id == ComponentVersion.definition_id)
        .where(
            ComponentDefinition.installation_id == installation_id,
            ComponentDefinition.slug == slug,
            ComponentDefinition.status == "active",
            ComponentVersion.retired_at.is_(None),
        )
        .order_by(ComponentVersion.version.desc())
        .limit(1)
    )


def notice_of(session, restriction: ActionProposal) -> ActionProposal | None:
    """The `notify_user` proposal of a restriction, if one was created (DSA-4)."""
    return session.scalar(select(ActionProposal).where(ActionProposal.operation_id == notice_operation_id(
        restriction.operation_id
    )))


def _author_of(session, proposal: ActionProposal) -> str | None:
    """The evidence's author of the restriction's target, when the report carried one."""
    reference = (proposal.target or {}).get("reference")
    if not reference:
        return None
    return session.scalar(
        select(ReportEvidence.author_reference)
        .where(ReportEvidence.report_id == proposal.report_id, ReportEvidence.target_reference == reference)
        .limit(1)
    )


def send_notice(
    uow: UnitOfWork, proposal: ActionProposal, statement: DsaStatement, settings: DsaSettings
) -> ActionProposal | None:
    """Queue the notice of `statement` once, under the restriction's approval (DSA-4).

    Args:
        uow: the unit of work recording the restriction's applied receipt.
        proposal: the applied restriction (``confirmed_at`` set).
        statement: its statement of reasons (the notice is rendered from its
            ``statement``, ``language`` and ``complaint_until``).
        settings: the DSA settings in force; ``notice_component`` names the component.

    Returns:
        The `notify_user` proposal: the existing one when already created (exactly
        once, by its operation id ``notice:{restriction's operation}``); None when no
        active notice component is configured.
    """
    session = uow.session
    existing = notice_of(session, proposal)
    if existing is not None:
        statement.notice_proposal_id = existing.id
        return existing
    component = notice_component(session, proposal.installation_id, settings.notice_component)
    if component is None:
        return None
    approval = approval_of_digest(session, proposal)
    notice = render_notice(
        statement.statement,
        statement.language,
        statement.complaint_until,
        languages=settings.notice_languages,
        default_language=settings.default_language,
    )
    applied_at = proposal.confirmed_at or statement.applied_at
    new = notice_proposal(
        original_facts(proposal),
        applied_at=applied_at,
        component_version_id=component.id,
        target=affected_user(statement.restriction, proposal.target or {}, _author_of(session, proposal)),
        payload=notice_payload(statement.puid, notice, statement.complaint_until),
        approval_id=approval.id if approval else None,
        destination=destination_of(session, component),
    )
    sent = insert_proposal(session, new)
    if approval is not None:
        add_inherited_approval(
            session, approval, sent, key_prefix="notice-authorized-by", at=applied_at,
            reason=f"Authorized by approval {approval.id} of {proposal.id}: the notice of its restriction.",
        )
    statement.notice_proposal_id = sent.id
    uow.audit(
        proposal.installation_id,
        f"dsa-notice-queued:{proposal.operation_id}",
        "dsa.notice_queued",
        Actor.system(proposal.run_id),
        "action_proposal",
        sent.id,
        {**new.audit_details, "statement_id": statement.id, "puid": statement.puid, "language": notice["language"]},
    )
    sent_id, cycle, attempts = sent.id, sent.delivery_cycle, sent.delivery_attempt_count
    uow.after_commit(lambda: enqueue_delivery(sent_id, cycle, attempts, 0, tag="notice"))
    return sent
