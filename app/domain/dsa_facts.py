"""From the console's records to the facts of a statement of reasons (SPEC §7 DSA-2).

Pure rules: the service (`app.services.dsa.statements`) loads plain records — the
report, the decision, the evidence of the action's target, the action (proposal or
its draft) — and `statement_facts` turns them, with the DSA settings in force, into
`app.domain.dsa.StatementFacts`. The same function builds the draft checked when a
decision is taken (application date = now) and the statement stored when the
restriction is applied, so what was accepted at decision time is what is built.

Where each fact comes from:

* source type and automated detection: the report's origin (`source_of`);
* automated decision: the workflow's authority (`automation_of`);
* facts: the decision's rationale and the policy version pinned on the proposal;
  explanation: the rationale;
* ground, category, reference, URL, keywords: the decision code's `DecisionMeaning`;
* restriction and its type: the component's declaration;
* content types: the target's kind (`DsaSettings.content_types`); territorial scope:
  the settings;
* application date: the applied receipt; end date: applied + a temporary action's
  duration; content date: the evidence's ``posted_at``; content language: the
  evidence's language.

A fact the records do not hold is left out, so `dsa.statement_problems` names it and
`missing_fact_message` says in words what is missing and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from app.domain import dsa
from app.domain.dsa_settings import DsaSettings

# Where a report came from, as the report API's optional ``source`` says it (DSA-2).
# Left out (None): a notice a user sent the platform under Article 16. A report opened
# in the console (``opened_by_id``) has no source: it is the console's own initiative.
REPORT_SOURCES = {
    "trusted_flagger": "A trusted flagger's notice",
    "other_notification": "Another kind of notification (e.g. an authority's order)",
    "automated_detection": "The platform's own automated detection",
}
ARTICLE_16_LABEL = "A user's notice (Article 16)"
SOURCE_TYPE_OF = {
    None: dsa.SourceType.ARTICLE_16,
    "trusted_flagger": dsa.SourceType.TRUSTED_FLAGGER,
    "other_notification": dsa.SourceType.OTHER_NOTIFICATION,
    "automated_detection": dsa.SourceType.VOLUNTARY,
}
CONTENT_TYPE_OTHER = "CONTENT_TYPE_OTHER"


@dataclass(frozen=True)
class ReportRecord:
    """The report a restriction enforces.

    Attributes:
        created_at: when the report was received (UTC).
        source: one of `REPORT_SOURCES`, or None (an Article 16 notice).
        opened_in_console: a moderator opened it in the console (``opened_by_id``,
            or a bulk batch's own case): the platform's own initiative.
    """

    created_at: datetime | None
    source: str | None = None
    opened_in_console: bool = False


@dataclass(frozen=True)
class DecisionRecord:
    """The decision the restriction enforces.

    Attributes:
        code: the decision code (its meaning comes from the settings).
        rationale: the moderator's words (facts and explanation).
        policy_version_id: the policy version pinned on the proposal, if any.
    """

    code: str
    rationale: str | None
    policy_version_id: str | None = None


@dataclass(frozen=True)
class EvidenceRecord:
    """What the platform sent about the action's target (REV-1).

    Attributes:
        reference: the target's reference, e.g. ``post:1001``.
        found: whether any evidence of it was received.
        posted_at: when the content was posted (UTC), if the evidence says.
        language: ISO 639-1 code of the content, if the evidence says.
    """

    reference: str
    found: bool = False
    posted_at: datetime | None = None
    language: str | None = None


@dataclass(frozen=True)
class ActionRecord:
    """The restricting action (a proposal, or the draft a decision would make).

    Attributes:
        proposal_id: its proposal id (the puid derives from it; a draft's is
            provisional).
        component_slug: its component's slug (the restriction is declared on it).
        target_kind: the target's kind (``post``, ``author_of``...).
        kind_label: the kind in words (for ``CONTENT_TYPE_OTHER``).
        approval_mode: ``human`` or ``bounded_auto``.
        created_by_type: ``system`` (a workflow made it) or ``operator``.
        bulk: an item of a bulk batch (a moderator chose the subject).
        emergency: approved alone as an emergency (POL-6).
        duration_seconds: a temporary action's duration; None when permanent.
    """

    proposal_id: str
    component_slug: str | None
    target_kind: str | None = None
    kind_label: str | None = None
    approval_mode: str = "human"
    created_by_type: str = "system"
    bulk: bool = False
    emergency: bool = False
    duration_seconds: int | None = None


def source_of(report: ReportRecord) -> tuple[dsa.SourceType, bool]:
    """The statement's source type and whether automated means detected the content
    (DSA-2).

    A report opened in the console is the platform's own initiative, found by a person
    (voluntary, detection No); ``automated_detection`` is the platform's own initiative
    found by automated means (voluntary, detection Yes); a trusted flagger's notice and
    another notification are what they say; no source is an Article 16 notice.

    Returns:
        (``SourceType``, automated detection).
    """
    if report.opened_in_console:
        return dsa.SourceType.VOLUNTARY, False
    source_type = SOURCE_TYPE_OF.get(report.source, dsa.SourceType.ARTICLE_16)
    return source_type, report.source == "automated_detection"


def automation_of(action: ActionRecord, report: ReportRecord) -> dsa.AutomatedDecision:
    """Whether the decision to restrict was automated, from the workflow's authority
    (DSA-2).

    * Bounded automation (approval mode ``bounded_auto``) applies the action with no
      person in between: the workflow decided → fully automated.
    * A person acting directly — a proposal an operator made (``created_by_type``
      ``operator``), an item of a bulk batch (the moderator chose each subject), an
      action on a report opened in the console (the moderator chose the subject), an
      emergency approval (one person, alone) — made the decision themselves, the
      machinery only carried it: not automated.
    * Otherwise a workflow made the proposal from a decision and a person approved it:
      automated means prepared what a person confirmed → partially automated.
    """
    if action.approval_mode == "bounded_auto" and not action.emergency:
        return dsa.AutomatedDecision.FULLY
    if action.created_by_type == "operator" or action.bulk or action.emergency or report.opened_in_console:
        return dsa.AutomatedDecision.NOT_AUTOMATED
    return dsa.AutomatedDecision.PARTIALLY


def decision_facts(decision: DecisionRecord) -> str | None:
    """The facts and circumstances relied on: the rationale, and the policy version it
    was taken under. None when the rationale is empty (a missing fact)."""
    rationale = (decision.rationale or "").strip()
    if not rationale:
        return None
    if decision.policy_version_id:
        return f"{rationale}\n\nDecided under policy version {decision.policy_version_id}."
    return rationale


def ends_at(applied_at: datetime, duration_seconds: int | None) -> datetime | None:
    """When a temporary restriction ends: applied + its duration (UTC); None when
    permanent (indefinite)."""
    return None if duration_seconds is None else applied_at + timedelta(seconds=duration_seconds)


def _content_types(settings: DsaSettings, action: ActionRecord) -> tuple[tuple[str, ...], str | None]:
    types = tuple(settings.content_types.get(action.target_kind or "", ()))
    other = (action.kind_label or action.target_kind) if CONTENT_TYPE_OTHER in types else None
    return types, other


def statement_facts(
    *,
    report: ReportRecord,
    decision: DecisionRecord,
    evidence: EvidenceRecord,
    action: ActionRecord,
    settings: DsaSettings,
    applied_at: datetime,
) -> dsa.StatementFacts | None:
    """The facts of the statement of reasons of one restricting action (DSA-2).

    Args:
        report, decision, evidence, action: the records (see the module docstring).
        settings: the DSA settings in force.
        applied_at: when the restriction applied (the applied receipt's
            ``confirmed_at``; now for a draft at decision time), UTC.

    Returns:
        The facts, missing ones None; None when the action's component declares no
        restriction (or DSA is off): it needs no statement.
    """
    declared = settings.restriction_of(action.component_slug)
    if declared is None:
        return None
    meaning = settings.decisions.get(decision.code)
    source_type, detected = source_of(report)
    content_types, content_type_other = _content_types(settings, action)
    language = (evidence.language or "").upper() or None
    end = ends_at(applied_at, action.duration_seconds)
    return dsa.StatementFacts(
        proposal_id=action.proposal_id,
        restriction=declared.restriction,
        restriction_type=declared.restriction_type,
        restriction_other=declared.other,
        category=meaning.category if meaning else None,
        ground=meaning.ground if meaning else None,
        ground_reference=meaning.reference if meaning else None,
        reference_url=meaning.reference_url if meaning else None,
        category_specification=tuple(meaning.keywords) if meaning else (),
        incompatible_content_illegal=meaning.illegal if meaning else None,
        explanation=(decision.rationale or "").strip() or None,
        decision_facts=decision_facts(decision),
        source_type=source_type,
        automated_detection=detected,
        automated_decision=automation_of(action, report),
        content_types=content_types,
        content_type_other=content_type_other,
        territorial_scope=tuple(settings.territorial_scope),
        application_date=applied_at.date(),
        content_date=evidence.posted_at.date() if evidence.posted_at else None,
        end_date=end.date() if end else None,
        content_language=language,
    )


_MEANING_FIELDS = frozenset({
    "category", "decision_ground", "illegal_content_legal_ground", "incompatible_content_ground",
    "decision_ground_reference_url", "category_specification", "incompatible_content_illegal",
})
_RATIONALE_FIELDS = frozenset({"decision_facts", "illegal_content_explanation", "incompatible_content_explanation"})


def _fact_words(field: str, message: str, decision: DecisionRecord, evidence: EvidenceRecord,
                action: ActionRecord) -> str:
    """One missing or invalid fact in words: what it is, and why the records lack it."""
    if field == "content_date":
        if not evidence.found:
            return f"the content date: no evidence of {evidence.reference} was received, so its posted time is unknown."
        if evidence.posted_at is None:
            return f"the content date: the evidence of {evidence.reference} gives no posted time."
        return f"a content date from 2000-01-01: the evidence of {evidence.reference} says {evidence.posted_at.date()}."
    if field in _RATIONALE_FIELDS:
        return "the facts and the explanation: the decision's rationale is empty."
    if field in _MEANING_FIELDS:
        return (f"the category, ground and reference of the decision code {decision.code}: "
                "the DSA settings give it no meaning.")
    if field in ("content_type", "content_type_other"):
        return f"the content type: the DSA settings give none for targets of kind {action.target_kind or 'unknown'}."
    if field == "content_language":
        return f"a known content language: the evidence of {evidence.reference} names {evidence.language}."
    if field == "territorial_scope":
        return "the territorial scope: the DSA settings name no country."
    return f"{field.replace('_', ' ')}: {message}"


def missing_fact_message(
    problems: dict[str, str], *, decision: DecisionRecord, evidence: EvidenceRecord, action: ActionRecord
) -> str:
    """Why a decision cannot yield a valid statement, in words (DSA-2).

    Args:
        problems: `dsa.statement_problems` of the draft (non-empty).
        decision, evidence, action: the records the draft was built from.

    Returns:
        One sentence per missing fact, e.g. "A statement of reasons needs the content
        date: the evidence of post:1001 gives no posted time."
    """
    sentences: list[str] = []
    for field, message in problems.items():
        words = _fact_words(field, message, decision, evidence, action)
        sentence = f"A statement of reasons needs {words}"
        if sentence not in sentences:
            sentences.append(sentence)
    return " ".join(sentences)
