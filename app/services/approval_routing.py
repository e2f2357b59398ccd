"""Which approval policies apply to an action, and the installation's policy settings
(SPEC POL-3, POL-4, POL-5).

`route_proposal` runs where every proposal row is built (`insert_proposal`): a
proposal that waits for a person records the policies that applied, as they were
then, with the facts routing read (protected subject, irreversible action). A later
change of the settings never changes what an open proposal needs.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select

from app.domain import approval_policy as pol
from app.domain.bulk.subjects import canonical_reference
from app.domain.states import ProposalState
from app.models import (
    ActionProposal,
    ApprovalSettingsVersion,
    ComponentDefinition,
    ComponentVersion,
    ProtectedSubject,
    ReportEvidence,
    ReportSubject,
)


def current_settings(session, installation_id: str) -> pol.ApprovalSettings:
    """The approval settings in force: the newest approved version, else the defaults
    (one reviewer; two for protected subjects and irreversible actions)."""
    row = session.scalar(
        select(ApprovalSettingsVersion)
        .where(ApprovalSettingsVersion.installation_id == installation_id)
        .order_by(ApprovalSettingsVersion.version.desc())
        .limit(1)
    )
    return pol.settings_from_json(row.settings) if row is not None else pol.DEFAULT_SETTINGS


def _references(target: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(the target's canonical reference, its kind)."""
    if not isinstance(target, dict) or not isinstance(target.get("reference"), str):
        return None, None
    return canonical_reference(target["reference"]), target.get("kind")


def authors_of(session, report_id: str | None, reference: str | None) -> set[str]:
    """Authors the report's evidence names for the targeted content: only the evidence
    of `reference` (canonical), not of the report's other targets."""
    if not report_id or not reference:
        return set()
    rows = session.execute(
        select(ReportEvidence.target_reference, ReportEvidence.author_reference).where(
            ReportEvidence.report_id == report_id, ReportEvidence.author_reference.is_not(None)
        )
    )
    return {canonical_reference(author) for target, author in rows
            if author and canonical_reference(target) == reference}


def known_authors(session, installation_id: str, references) -> dict[str, str]:
    """Reference → author, as the queue knows it from any report's evidence about that
    subject (`ReportSubject.author_reference`): a report without evidence of its own
    (a pasted list's item) still names its content's author (POL-4)."""
    references = sorted({r for r in references if r})
    found: dict[str, str] = {}
    for start in range(0, len(references), 500):
        rows = session.execute(
            select(ReportSubject.reference, ReportSubject.author_reference).where(
                ReportSubject.installation_id == installation_id,
                ReportSubject.reference.in_(references[start : start + 500]),
                ReportSubject.author_reference.is_not(None),
            )
        )
        found.update({reference: canonical_reference(author) for reference, author in rows if author})
    return found


def protection_of(session, installation_id: str, target: dict | None, report_id: str | None = None):
    """The protected-subject mark that covers an action's target, or None (POL-4): an
    account marked protected covers actions on it (``account`` targets, and
    ``author_of`` targets whose author it is); an author marked protected covers every
    target by that author too."""
    reference, kind = _references(target)
    if reference is None:
        return None
    authors = set()
    if kind != "account":
        authors = authors_of(session, report_id, reference) | set(known_authors(session, installation_id, [reference]).values())
    account_refs = {reference} | (authors if kind == "author_of" else set())
    return session.scalar(
        select(ProtectedSubject)
        .where(
            ProtectedSubject.installation_id == installation_id,
            ProtectedSubject.unmarked_at.is_(None),
            or_(
                ProtectedSubject.subject_reference.in_(account_refs),
                (ProtectedSubject.kind == "author") & ProtectedSubject.subject_reference.in_(authors | {reference}),
            ),
        )
        .order_by(ProtectedSubject.marked_at)
        .limit(1)
    )


def route_facts(session, installation_id: str, component_version_id: str, action_code: str, *,
                target: dict | None = None, report_id: str | None = None, items: int = 1,
                protected: bool | None = None) -> pol.RouteFacts:
    """What routing reads about an action (POL-3)."""
    version = session.get(ComponentVersion, component_version_id)
    definition = session.get(ComponentDefinition, version.definition_id) if version is not None else None
    if protected is None:
        protected = protection_of(session, installation_id, target, report_id) is not None
    return pol.RouteFacts(
        component=definition.name if definition is not None else "",
        action_code=action_code,
        protected=protected,
        irreversible=bool(version is not None and version.irreversible),
        items=items,
    )


def route_record_for(session, installation_id: str, facts: pol.RouteFacts) -> dict[str, Any]:
    """The record stored on a proposal or batch: the policies that apply under the
    settings in force, and why (POL-3)."""
    policies, rule = pol.route(current_settings(session, installation_id), facts)
    return pol.route_record(policies, rule, facts)


def route_proposal(session, proposal: ActionProposal) -> None:
    """Record on a proposal that waits for a person the policies that apply (POL-3)."""
    if proposal.state != ProposalState.APPROVAL_REQUIRED or proposal.bulk_batch_id:
        return
    facts = route_facts(
        session,
        proposal.installation_id,
        proposal.component_version_id,
        proposal.action_code,
        target=proposal.target,
        report_id=proposal.report_id,
    )
    proposal.approval_route = route_record_for(session, proposal.installation_id, facts)
