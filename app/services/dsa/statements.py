"""Statements of reasons built from the console's records (SPEC §7 DSA-2).

`record_statement` runs in the applied receipt's transaction (`applied.on_applied`):
it loads the records (`records`), builds the statement with the same rules the
decision-time check used (`app.domain.dsa_facts`), and stores one `DsaStatement` per
proposal, pending submission. A statement that local validation refuses at apply
time (the settings changed after the decision) is kept as a dead letter with its
problems, never lost.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.domain import dsa
from app.domain.digests import canonical_json
from app.domain.dsa_answers import StatementState
from app.domain.dsa_facts import DecisionRecord, ends_at, missing_fact_message, statement_facts
from app.domain.dsa_settings import DsaSettings
from app.models import ActionProposal, Decision, DsaStatement, Report, WorkflowRun
from app.services.uow import Actor, UnitOfWork

from .records import action_record, component_slug, evidence_record, report_record


def _restricts(proposal: ActionProposal, slug: str | None, settings: DsaSettings) -> bool:
    """Whether an applied proposal is a restriction that needs a statement: its
    component declares one, and it is not an appeal correction, a temporary
    restriction's reversal or the notice itself. A compensation whose component
    restricts is a restriction like any other (DSA-2)."""
    if proposal.appeal_id or proposal.reverses_proposal_id:
        return False
    if slug is None or slug == settings.notice_component:
        return False
    return settings.restriction_of(slug) is not None


def record_statement(uow: UnitOfWork, proposal: ActionProposal, settings: DsaSettings) -> DsaStatement | None:
    """The statement of reasons of an applied restriction, written once (DSA-2).

    Args:
        uow: the unit of work recording the applied receipt (nothing is committed here).
        proposal: the applied proposal (its ``confirmed_at`` set: the application date).
        settings: the DSA settings in force (on).

    Returns:
        The new (or existing: one per proposal, its puid unique) row, ``pending``; a
        ``dead_letter`` with the problems in words as ``last_error`` when local
        validation refuses it now; None when the proposal restricts nothing.
        Audited ``dsa.statement_built`` (puid, state, problems) when written.
    """
    session = uow.session
    slug = component_slug(session, proposal.component_version_id)
    if not _restricts(proposal, slug, settings):
        return None
    puid = dsa.puid_for(proposal.id)
    existing = session.scalar(
        select(DsaStatement).where(DsaStatement.installation_id == proposal.installation_id, DsaStatement.puid == puid)
    )
    if existing is not None:
        return existing
    report = session.get(Report, proposal.report_id)
    decision = _decision_of(session, proposal)
    decision_record = DecisionRecord(
        code=decision.decision_code if decision else "",
        rationale=decision.rationale if decision else None,
        policy_version_id=proposal.policy_version_id,
    )
    evidence = evidence_record(session, proposal.installation_id, proposal.report_id, proposal.target_reference)
    action = action_record(proposal, slug)
    applied_at = proposal.confirmed_at
    facts = statement_facts(report=report_record(report), decision=decision_record, evidence=evidence,
                            action=action, settings=settings, applied_at=applied_at)
    statement = dsa.build_statement(facts)
    problems = dsa.statement_problems(statement)
    row = DsaStatement(
        installation_id=proposal.installation_id,
        proposal_id=proposal.id,
        puid=puid,
        statement=statement,
        state=(StatementState.DEAD_LETTER if problems else StatementState.PENDING).value,
        last_error=missing_fact_message(problems, decision=decision_record, evidence=evidence, action=action)
        if problems else None,
        report_id=report.id,
        decision_id=decision.id if decision else None,
        category=facts.category or "",
        ground=str(facts.ground or ""),
        restriction=str(facts.restriction),
        restriction_type=facts.restriction_type or "",
        automated_decision=str(facts.automated_decision),
        automated_detection=bool(facts.automated_detection),
        source_type=str(facts.source_type),
        language=_language(evidence.language, settings),
        reported_at=report.created_at,
        applied_at=applied_at,
        ends_at=ends_at(applied_at, action.duration_seconds),
        complaint_until=applied_at + timedelta(days=settings.complaint_window_days),
    )
    session.add(row)
    session.flush()
    _audit(uow, proposal, row, problems)
    return row


def _decision_of(session, proposal: ActionProposal) -> Decision | None:
    """The decision the restriction enforces: the one pinned on the proposal, else the
    one that started its run."""
    decision_id = proposal.decision_id
    if decision_id is None:
        run = session.get(WorkflowRun, proposal.run_id)
        decision_id = run.decision_id if run is not None else None
    return session.get(Decision, decision_id) if decision_id else None


def _language(language: str | None, settings: DsaSettings) -> str:
    """The affected user's language for the notice (DSA-4): the content's, when a
    notice template exists in it, else the installation's default."""
    code = (language or "").lower()
    return code if code in settings.notice_languages else settings.default_language


def _audit(uow: UnitOfWork, proposal: ActionProposal, row: DsaStatement, problems: dict[str, str]) -> None:
    uow.audit(
        proposal.installation_id,
        f"dsa-statement-built:{row.puid}",
        "dsa.statement_built",
        Actor.system(proposal.run_id),
        "dsa_statement",
        row.id,
        {
            "proposal_id": proposal.id,
            "puid": row.puid,
            "state": row.state,
            "restriction_type": row.restriction_type,
            "automated_decision": row.automated_decision,
            "problems": canonical_json(problems) if problems else None,
        },
    )
