"""What a reviewer sees beside a decision (SPEC REV-1, REV-2, REV-4): the platform's
evidence, the subject's history, and whether an action was undone.

Every function runs a fixed number of queries, whatever the history holds (each is
bounded by a LIMIT and served by an index), so the pages stay fast as a busy
account's history grows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, bindparam, func, literal, select, union_all

from app.domain.case_states import OPEN_CORRECTION_STATES, CorrectionState
from app.domain.maker_checker import Verdict
from app.domain.states import ProposalState, is_terminal
from app.extensions import db
from app.models.statements import prebuilt
from app.models import (
    ActionProposal,
    AppealCorrection,
    Decision,
    OperatorUser,
    Report,
    ReportEvidence,
    ReportTarget,
    predicates,
)

P = ActionProposal
HISTORY_REPORTS = 20  # newest first; older history is one click away on those reports
HISTORY_ACTIONS = 60


def evidence_by_report(report_ids: Iterable[str]) -> dict[str, list[ReportEvidence]]:
    """Evidence rows of each report, in target order (one query)."""
    statement = prebuilt(("evidence-by-report",), lambda: (
        select(ReportEvidence)
        .join(ReportTarget, ReportTarget.id == ReportEvidence.report_target_id)
        .where(ReportEvidence.report_id.in_(bindparam("report_ids", expanding=True)))
        .order_by(ReportEvidence.report_id, ReportTarget.position)
    ))
    rows = db.session.scalars(statement, {"report_ids": sorted(set(report_ids))}).all()
    by_report: dict[str, list[ReportEvidence]] = {}
    for row in rows:
        by_report.setdefault(row.report_id, []).append(row)
    return by_report


def newest_evidence(installation_id: str, references: Iterable[str]) -> dict[str, tuple[ReportEvidence, str]]:
    """The newest evidence the platform sent for each subject (BULK-3, REV-1), from any
    report of the installation, with that report's public reference (one query).

    Args:
        installation_id: the operator's installation.
        references: subject references (``post:1001``); unknown ones are left out.

    Returns:
        {reference: (evidence row, report public reference)}.
    """
    wanted = set(references)
    if not wanted:
        return {}
    rank = func.row_number().over(partition_by=ReportEvidence.target_reference,
                                  order_by=(ReportEvidence.created_at.desc(), ReportEvidence.id.desc())).label("rank")
    inner = (
        select(ReportEvidence.id.label("evidence_id"), Report.public_reference.label("report_reference"), rank)
        .join(Report, Report.id == ReportEvidence.report_id)
        .where(ReportEvidence.installation_id == installation_id, ReportEvidence.target_reference.in_(wanted))
        .subquery()
    )
    rows = db.session.execute(
        select(ReportEvidence, inner.c.report_reference)
        .join(inner, inner.c.evidence_id == ReportEvidence.id)
        .where(inner.c.rank == 1)
    ).all()
    return {row.target_reference: (row, reference) for row, reference in rows}


# -- undone actions (REV-4) ------------------------------------------------------

@dataclass(frozen=True)
class UndoMark:
    """An action undone (or being undone) by a compensation or an appeal correction.

    Attributes:
        done: True once the undo was applied (compensation) or confirmed (correction).
        via: ``compensation`` or ``correction``.
        proposal_id: the undoing proposal (None for a manual correction).
        appeal_id: the appeal, for a correction.
        action_code: the undoing action's code, when there is a proposal.
        state: the undoing proposal's state, or the correction's.
    """

    done: bool
    via: str
    proposal_id: str | None
    appeal_id: str | None
    action_code: str | None
    state: str


def _undo_statements():
    """Built once (every list page runs them): the compensations and the appeal
    corrections of the proposals in bound ``ids`` (expanding)."""
    ids = bindparam("ids", expanding=True)
    compensations = select(P.compensates_proposal_id, P.id, P.action_code, P.state, P.delivery_terminal).where(
        P.compensates_proposal_id.in_(ids)
    )
    corrections = (
        select(
            AppealCorrection.original_proposal_id,
            AppealCorrection.proposal_id,
            AppealCorrection.appeal_id,
            AppealCorrection.state,
            P.action_code,
        )
        .outerjoin(P, P.id == AppealCorrection.proposal_id)
        .where(AppealCorrection.original_proposal_id.in_(ids))
    )
    return compensations, corrections


def undo_marks(proposal_ids: Iterable[str]) -> dict[str, UndoMark]:
    """For each proposal that was undone or is being undone, how (two queries).

    A done undo wins over a pending one; failed, rejected and cancelled undos mark
    nothing (the action stands).
    """
    ids = set(proposal_ids)
    marks: dict[str, UndoMark] = {}

    def keep(original_id: str, mark: UndoMark) -> None:
        if original_id not in marks or (mark.done and not marks[original_id].done):
            marks[original_id] = mark

    compensations_of, corrections_of = prebuilt(("undo-marks",), _undo_statements)
    compensations = db.session.execute(compensations_of, {"ids": sorted(ids)}).all()
    for original_id, id, code, state, terminal in compensations:
        if state == ProposalState.APPLIED:
            keep(original_id, UndoMark(True, "compensation", id, None, code, state))
        elif not is_terminal(state, terminal):  # still on its way
            keep(original_id, UndoMark(False, "compensation", id, None, code, state))
    corrections = db.session.execute(corrections_of, {"ids": sorted(ids)}).all()
    for original_id, proposal_id, appeal_id, state, code in corrections:
        if state == CorrectionState.CONFIRMED:
            keep(original_id, UndoMark(True, "correction", proposal_id, appeal_id, code, state))
        elif state in OPEN_CORRECTION_STATES:
            keep(original_id, UndoMark(False, "correction", proposal_id, appeal_id, code, state))
    return marks


# -- subject history (REV-2) -----------------------------------------------------


@dataclass
class HistoryEntry:
    """Another report about the same target or the same account.

    Attributes:
        reasons: why it is shown and what it shares, as (words, reference):
            (``same target``, the target), (``about the author's account``, the
            account), (``by the same author``, the author), (``by this account``, it).
    """

    report: Report
    reasons: list[tuple[str, str]]
    references: list[str]
    decision: Decision | None
    decision_maker: str | None
    proposals: list[ActionProposal] = field(default_factory=list)


@dataclass
class Subject:
    """What a report is about: its targets and their authors."""

    targets: list[str]
    authors: list[str]

    @property
    def references(self) -> set[str]:
        return set(self.targets) | set(self.authors)


def subject_of(targets: Iterable[ReportTarget], evidence: Iterable[ReportEvidence]) -> Subject:
    """A report's subject: its target references and the authors its evidence names."""
    return Subject(
        [t.target_reference for t in targets],
        sorted({e.author_reference for e in evidence if e.author_reference}),
    )


def _matches():
    """SQL (a subquery): (report id, reference, via) rows of other reports on a subject;
    bound ``installation_id``, ``report_id`` and ``references`` (expanding: the
    subject's targets and their authors' accounts)."""
    by_target = select(
        ReportTarget.report_id.label("report_id"),
        ReportTarget.target_reference.label("reference"),
        literal("target").label("via"),
    ).where(
        ReportTarget.installation_id == bindparam("installation_id"),
        ReportTarget.target_reference.in_(bindparam("references", expanding=True)),
        ReportTarget.report_id != bindparam("report_id"),
    )
    by_author = select(
        ReportEvidence.report_id.label("report_id"),
        ReportEvidence.target_reference.label("reference"),
        ReportEvidence.author_reference.label("via"),
    ).where(
        ReportEvidence.installation_id == bindparam("installation_id"),
        ReportEvidence.author_reference.in_(bindparam("references", expanding=True)),
        ReportEvidence.report_id != bindparam("report_id"),
    )
    return union_all(by_target, by_author).subquery()


def _history_statements():
    """The history's first two statements, built once (building them cost more than
    running them): the newest reports on the subject, and why each is there."""
    matches = _matches()
    reports = (
        select(Report)
        .where(Report.id.in_(select(matches.c.report_id)))
        .order_by(Report.created_at.desc(), Report.id.desc())
        .limit(HISTORY_REPORTS)
    )
    why = select(matches.c.report_id, matches.c.reference, matches.c.via).where(
        matches.c.report_id.in_(bindparam("ids", expanding=True))
    )
    return reports, why


def _reason(subject: Subject, reference: str, via: str) -> tuple[str, str]:
    """Why a report is in the history and what it shares: the target, or the author (QUEUE-6)."""
    if via == "target":
        return ("same target" if reference in subject.targets else "about the author's account"), reference
    return ("by the same author" if via in subject.authors else "by this account"), via


def subject_history(installation_id: str, report_id: str, subject: Subject) -> list[HistoryEntry]:
    """Other reports on the same targets or their authors' accounts, newest first,
    with each one's latest decision and its actions (REV-2; five queries).

    Args:
        installation_id: the operator's installation (history never crosses tenants).
        report_id: the report the page is about (left out of its own history).
        subject: its target references and their authors' account references.

    Returns:
        At most `HISTORY_REPORTS` entries, newest report first.
    """
    reports_of, why_of = prebuilt(("subject-history",), _history_statements)
    found = {"installation_id": installation_id, "report_id": report_id, "references": sorted(subject.references)}
    reports = db.session.scalars(reports_of, found).all()
    ids = [r.id for r in reports]
    why: dict[str, tuple[list[tuple[str, str]], list[str]]] = {id: ([], []) for id in ids}
    for rid, reference, via in db.session.execute(why_of, {**found, "ids": ids}):
        reasons, references = why[rid]
        reason = _reason(subject, reference, via)
        if reason not in reasons:
            reasons.append(reason)
        if reference not in references:
            references.append(reference)
    latest = (
        select(Decision.report_id, func.max(Decision.seq).label("seq"))
        .where(Decision.report_id.in_(ids))
        .group_by(Decision.report_id)
        .subquery()
    )
    decisions = {
        d.report_id: d
        for d in db.session.scalars(
            select(Decision).join(latest, and_(Decision.report_id == latest.c.report_id, Decision.seq == latest.c.seq))
        )
    }
    names = dict(
        db.session.execute(
            select(OperatorUser.id, OperatorUser.display_name).where(
                OperatorUser.id.in_({d.maker_id for d in decisions.values()})
            )
        ).all()
    )
    proposals: dict[str, list[ActionProposal]] = {}
    for p in db.session.scalars(
        select(P).where(P.report_id.in_(ids)).order_by(P.created_at.desc(), P.id.desc()).limit(HISTORY_ACTIONS)
    ):
        proposals.setdefault(p.report_id, []).append(p)
    return [
        HistoryEntry(
            report=r,
            reasons=why[r.id][0],
            references=why[r.id][1],
            decision=decisions.get(r.id),
            decision_maker=names.get(decisions[r.id].maker_id) if r.id in decisions else None,
            proposals=proposals.get(r.id, []),
        )
        for r in reports
    ]


def contested_actions(report_id: str, decision_id: str | None) -> list[ActionProposal]:
    """The actions that enforced a decision an appeal contests (REV-4; one query):
    those that pin it, and those of the runs it started."""
    from app.models import WorkflowRun

    runs = select(WorkflowRun.id).where(WorkflowRun.decision_id == decision_id)
    return list(
        db.session.scalars(
            select(P)
            .where(P.report_id == report_id, P.appeal_id.is_(None), P.compensates_proposal_id.is_(None))
            .where(~predicates.notice())  # the user's notice enforced nothing (DSA-4)
            .where((P.decision_id == decision_id) | P.run_id.in_(runs))
            .order_by(P.created_at)
        )
    )


# -- what the pages get ---------------------------------------------------------


@dataclass
class Review:
    """Evidence, history and undo marks for one page about one report."""

    evidence: list[ReportEvidence]
    history: list[HistoryEntry]
    undo: dict[str, UndoMark]
    subject: Subject


def review_of(installation_id: str, report_id: str, proposal_ids: Iterable[str] = (),
              subject_reference: str | None = None) -> Review:
    """Everything beside the decision on a report, proposal or appeal page (REV-1, REV-2, REV-4).

    Args:
        installation_id: the operator's installation.
        report_id: the report the page is about.
        proposal_ids: proposals the page lists (their undo marks come too).
        subject_reference: the subject when it is not the report's target (a bulk
            item, proposed on its batch's case report, BULK-3): the evidence is the
            newest the platform sent for it and the history is about it.

    Returns:
        The report's evidence, its subject history and the undo marks of the
        page's proposals and of the history's (a fixed number of queries).
    """
    if subject_reference:
        found = newest_evidence(installation_id, [subject_reference]).get(subject_reference)
        evidence = [found[0]] if found else []
        subject = Subject([subject_reference], sorted({e.author_reference for e in evidence if e.author_reference}))
    else:
        targets = db.session.scalars(
            select(ReportTarget).where(ReportTarget.report_id == report_id).order_by(ReportTarget.position)
        ).all()
        evidence = evidence_by_report([report_id]).get(report_id, [])
        subject = subject_of(targets, evidence)
    history = subject_history(installation_id, report_id, subject)
    shown = set(proposal_ids) | {p.id for entry in history for p in entry.proposals}
    return Review(evidence, history, undo_marks(shown), subject)


# -- the approval queue (REV-1, REV-5) ----------------------------------------------


@dataclass(frozen=True)
class TaskReview:
    evidence: list[ReportEvidence]
    other_reports: int  # other reports on the same authors
    verdict: Verdict


def task_reviews(operator: OperatorUser, rows: list[dict[str, Any]]) -> dict[str, TaskReview]:
    """For each approval task row: the evidence, how many other reports its authors
    have, and whether the viewer may decide it (three queries).

    A task the viewer may not decide is marked, and its claim is refused
    (`app.services.cases.tasks.claim_task`).
    """
    proposals = [row["proposal"] for row in rows if row.get("proposal") is not None]
    evidence = evidence_by_report({p.report_id for p in proposals})
    authors = {e.author_reference for items in evidence.values() for e in items if e.author_reference}
    counts = dict(
        db.session.execute(
            select(ReportEvidence.author_reference, func.count(func.distinct(ReportEvidence.report_id)))
            .where(ReportEvidence.installation_id == operator.installation_id)
            .where(ReportEvidence.author_reference.in_(authors))
            .group_by(ReportEvidence.author_reference)
        ).all()
    )
    # FOUR-1: whether the viewer may decide comes from the row's claim offer (the domain's makers rule)
    refused = {
        row["proposal"].id: row["claim"].reason
        for row in rows
        if row.get("proposal") is not None
        and row.get("claim") is not None
        and row["claim"].shown
        and not row["claim"].allowed
    }
    reviews = {}
    for p in proposals:
        items = evidence.get(p.report_id, [])
        own = {e.author_reference for e in items if e.author_reference}
        others = max((counts.get(a, 1) - 1 for a in own), default=0)
        verdict = Verdict(False, refused[p.id]) if p.id in refused else Verdict(True)
        reviews[p.id] = TaskReview(items, others, verdict)
    return reviews
