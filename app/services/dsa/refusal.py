"""A decision that could not yield a valid statement of reasons is refused when it is
taken (SPEC §7 DSA-2).

Every decision path calls here before it commits — a single decision
(`record_decision`), a subject's (`decide_subject`, QUEUE-3), a bulk batch's items
(`submit_batch`, BULK-3), and so reports opened in the console too. For each action
the decision would take whose component declares a restriction, a draft statement is
built from the same records and rules as at apply time (application date now) and
checked against the Transparency Database's rules (`dsa.statement_problems`); the
first action that fails refuses the decision with ``dsa_statement_incomplete``,
naming the missing fact. The caller raises before its commit, so nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.domain import dsa
from app.domain.clock import iso, utcnow
from app.domain.dsa_facts import ActionRecord, DecisionRecord, EvidenceRecord, missing_fact_message, statement_facts
from app.domain.dsa_settings import DsaSettings
from app.domain.errors import ActionError, ApiError
from app.domain.expressions import evaluate_mapping
from app.domain.proposal import identity
from app.domain.proposal.temporary import temporary_config
from app.models import ComponentVersion, Decision, Report, ReportTarget, WorkflowVersion
from app.services.cases.snapshot import decision_json, report_json

from .records import component_slug, evidence_record, evidence_records, kind_label, report_record
from .settings import current_settings

INCOMPLETE = "dsa_statement_incomplete"


@dataclass(frozen=True)
class DraftAction:
    """One restricting action a decision would take, before any proposal exists.

    Attributes:
        action: the action as the statement rules read it.
        reference: its target's reference (whose evidence gives the content date).
        report_id: the report it would be proposed on.
    """

    action: ActionRecord
    reference: str | None
    report_id: str


def check_drafts(session, installation_id: str, report: Report, decision: DecisionRecord,
                 drafts: Iterable[DraftAction], settings: DsaSettings | None = None,
                 evidence: dict[tuple, EvidenceRecord] | None = None) -> None:
    """Refuse when one of `drafts` could not yield a valid statement (DSA-2).

    Args:
        session: the deciding unit of work's session.
        installation_id: whose settings and evidence.
        report: the report the decision is on (its origin).
        decision: the decision's code, rationale and policy version.
        drafts: the restricting actions it would take.
        settings: the settings in force (read when None).
        evidence: the drafts' evidence by (report id, reference), when read already
            (`evidence_records`); read per draft otherwise.

    Raises:
        ApiError: 422 ``dsa_statement_incomplete`` naming the missing fact, e.g. "A
            statement of reasons needs the content date: the evidence of post:1001
            gives no posted time."
    """
    settings = settings or current_settings(session, installation_id)
    if not settings.enabled:
        return
    now = utcnow()
    origin = report_record(report)
    for draft in drafts:
        key = (draft.report_id, draft.reference)
        record = evidence[key] if evidence and key in evidence else evidence_record(
            session, installation_id, draft.report_id, draft.reference)
        facts = statement_facts(report=origin, decision=decision, evidence=record, action=draft.action,
                                settings=settings, applied_at=now)
        if facts is None:
            continue
        problems = dsa.statement_problems(dsa.build_statement(facts))
        if problems:
            message = missing_fact_message(problems, decision=decision, evidence=record, action=draft.action)
            raise ApiError(422, INCOMPLETE, message)


def ensure_decision_yields_statements(session, report: Report, decision: Decision,
                                      versions: Iterable[WorkflowVersion]) -> None:
    """Refuse a decision whose triggered workflows would apply a restriction that
    could not yield a valid statement (DSA-2). Call before the decision commits.

    Args:
        session: the deciding unit of work's session (the decision flushed).
        report: the report decided (the workflows run on it).
        decision: the decision recorded.
        versions: the workflow versions the decision triggers.

    Raises:
        ApiError: 422 ``dsa_statement_incomplete`` (`check_drafts`).
    """
    versions = list(versions)
    if not versions:
        return
    settings = current_settings(session, report.installation_id)
    if not settings.enabled:
        return
    context = _context(session, report, decision)
    drafts = [
        draft
        for version in versions
        for node_id, node in (version.graph.get("nodes") or {}).items()
        if (draft := _draft(session, report, version, node_id, node, context, settings)) is not None
    ]
    record = DecisionRecord(decision.decision_code, decision.rationale, report.policy_version_id)
    check_drafts(session, report.installation_id, report, record, drafts, settings)


def _context(session, report: Report, decision: Decision) -> dict[str, Any]:
    """The JSON a node's input mapping would read on this report (PREP-4)."""
    return {
        "report": report_json(report),
        "targets": [
            {"target_reference": reference, "kind": kind}
            for reference, kind in session.execute(
                select(ReportTarget.target_reference, ReportTarget.kind)
                .where(ReportTarget.report_id == report.id)
                .order_by(ReportTarget.position, ReportTarget.created_at, ReportTarget.id)
            )
        ],
        "decision": decision_json(decision),
        "appeal": None,
        "run": {"id": f"draft:{decision.id}", "workflow_version_id": None, "decision_id": decision.id,
                "created_at": iso(utcnow())},
    }


def _draft(session, report: Report, version: WorkflowVersion, node_id: str, node: Any, context: dict,
           settings: DsaSettings) -> DraftAction | None:
    """The restricting action a node would propose, or None when it restricts nothing."""
    config = (node.get("config") if isinstance(node, dict) else None) or {}
    component = session.get(ComponentVersion, config.get("component_version_id") or "")
    slug = component_slug(session, component.id) if component is not None else None
    if slug is None or slug == settings.notice_component or settings.restriction_of(slug) is None:
        return None
    try:
        mapped = evaluate_mapping(node.get("input_mapping") or {}, {**context, "run": {
            **context["run"], "workflow_version_id": version.id}})
        target = identity.mapped_objects(mapped)[0]
    except ActionError:  # the node would fail to prepare: no restriction, no statement
        return None
    try:
        mode = identity.approval_mode(config.get("approval_policy"), component.approval_policy.get("mode"),
                                      version.authority_mode)
        temporary = temporary_config(component.temporary, config.get("temporary"), mapped.get("duration_seconds"))
    except ActionError:
        return None
    duration = (temporary or {}).get("duration_seconds")
    kind = target.get("kind")
    action = ActionRecord(
        proposal_id=f"draft:{version.id}:{node_id}",
        component_slug=slug,
        target_kind=kind,
        kind_label=kind_label(kind),
        approval_mode=mode,
        duration_seconds=duration if isinstance(duration, int) else None,
    )
    reference = target.get("reference") if isinstance(target.get("reference"), str) else None
    return DraftAction(action=action, reference=reference, report_id=report.id)


def ensure_items_yield_statements(session, installation_id: str, decision_code: str, rationale: str,
                                  proposals: list[dict[str, Any]]) -> None:
    """Refuse a bulk batch one of whose items could not yield a valid statement of
    reasons (DSA-2: one statement per item, BULK-3). Call before the batch commits.

    Args:
        session: the submitting unit of work's session (the items' reports decided).
        installation_id: the batch's installation.
        decision_code, rationale: the batch's decision (its reason is the rationale).
        proposals: the items' proposal rows as they will be inserted
            (`proposal_values`), each with its report, target and component.

    Raises:
        ApiError: 422 ``dsa_statement_incomplete`` naming the first item's missing
            fact (its subject's reference is in the words).
    """
    settings = current_settings(session, installation_id)
    if not settings.enabled or not proposals:
        return
    slugs: dict[str, str | None] = {}
    drafts: list[tuple[DraftAction, DecisionRecord]] = []
    for values in proposals:
        version_id = values["component_version_id"]
        if version_id not in slugs:
            slugs[version_id] = component_slug(session, version_id)
        slug = slugs[version_id]
        if slug is None or slug == settings.notice_component or settings.restriction_of(slug) is None:
            continue
        kind = (values.get("target") or {}).get("kind")
        duration = (values.get("temporary") or {}).get("duration_seconds")
        action = ActionRecord(
            proposal_id=values["id"], component_slug=slug, target_kind=kind, kind_label=kind_label(kind),
            approval_mode=values["approval_mode"], created_by_type=values["created_by_type"], bulk=True,
            duration_seconds=duration if isinstance(duration, int) else None,
        )
        draft = DraftAction(action=action, reference=values.get("target_reference"), report_id=values["report_id"])
        drafts.append((draft, DecisionRecord(decision_code, rationale, values.get("policy_version_id"))))
    found = evidence_records(session, installation_id, [(d.report_id, d.reference) for d, _decision in drafts])
    for draft, decision in drafts:
        report = session.get(Report, draft.report_id)  # decided in this unit of work: already loaded
        check_drafts(session, installation_id, report, decision, [draft], settings, found)
