"""Start a bulk action: its selection resolved into a frozen, counted item list
(SPEC BULK-1, BULK-2). Nothing is proposed or sent; the dry run expires.

A selection is a pasted or uploaded list of subject references, a filter over open
reports, or one author's subjects. Bad input is answered line by line and nothing is
stored; a good one is stored as a batch in ``dry_run`` with one item per subject and
its outcome (would act, already applied, protected, invalid, duplicate).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from flask import current_app
from sqlalchemy import select

from app.domain.bulk.batch import Outcome, cap_for, classify, dry_run_digest
from app.domain.bulk.report_filter import parse_report_filter
from app.domain.bulk.subjects import LineError, parse_subject_list
from app.domain.clock import iso, utcnow
from app.domain.errors import ActionError, ApiError
from app.models import BulkBatch, BulkCap, BulkItem, ComponentVersion, OperatorUser, new_id
from app.models.statements import insert_rows
from app.services.bulk.actions import BulkAction, load_action
from app.services.bulk.item_proposals import ItemCase, mapped_item
from app.services.bulk.sources import SourceSubject, subjects_from_reports, subjects_of_author
from app.services.bulk.standing import standings
from app.services.uow import Actor, unit_of_work

SOURCES = ("list", "reports", "author")
MAX_REASON = 5000


class SelectionRefused(ApiError):
    """A selection with bad lines (BULK-1): each line's code, nothing stored."""

    def __init__(self, lines: list[LineError]) -> None:
        count = sum(1 for line in lines if line.line > 0) or len(lines)
        super().__init__(
            400,
            lines[0].code if len(lines) == 1 else "bulk_selection_invalid",
            lines[0].message if len(lines) == 1 else f"{count} lines of the selection were refused; nothing was stored.",
            "subjects",
        )
        self.lines = lines


@dataclass(frozen=True)
class Classified:
    """A subject with its dry-run outcome (BULK-2)."""

    subject: SourceSubject
    outcome: Outcome
    detail: str | None


def operator_cap(session, operator: OperatorUser) -> int:
    """Items per batch `operator` may take (BULK-5)."""
    caps = {row.role: row.max_items for row in session.scalars(select(BulkCap).where(
        BulkCap.installation_id == operator.installation_id))}
    return cap_for(operator.roles, caps)


def check_selection(value: Any) -> dict[str, Any]:
    """The selection as stored (BULK-1): {source, text | filter | author_reference}.

    Raises:
        ApiError: 400 ``bulk_source_invalid`` for an unknown source or a missing part.
    """
    source = value.get("source") if isinstance(value, dict) else None
    if source not in SOURCES:
        raise ApiError(400, "bulk_source_invalid", "Choose a pasted list, a filter over open reports, or an author.", "source")
    part = {"list": "text", "reports": "filter", "author": "author_reference"}[source]
    if value.get(part) in (None, "", {}):
        raise ApiError(400, "bulk_source_invalid", f"The selection needs its {part.replace('_', ' ')}.", part)
    return {"source": source, part: value[part]}


def resolve_selection(session, installation_id: str, selection: dict[str, Any], cap: int) -> list[SourceSubject]:
    """The subjects a selection names now, in order (BULK-1, BULK-4).

    Raises:
        SelectionRefused: a pasted list with bad lines.
        ApiError: 400 for a bad filter or author, an empty selection, over the cap.
    """
    source = selection["source"]
    if source == "list":
        text = selection["text"]
        if not isinstance(text, str):
            raise ApiError(400, "bulk_source_invalid", "Paste one subject reference per line.", "text")
        subjects, errors = parse_subject_list(text, cap=cap)
        if errors:
            raise SelectionRefused(errors)
        return [SourceSubject(s.reference, s.kind, (), s.line) for s in subjects]
    if source == "reports":
        if not isinstance(selection["filter"], dict):
            raise ApiError(400, "bulk_filter_invalid", "The filter is a set of criteria.", "filter")
        return subjects_from_reports(session, installation_id, parse_report_filter(selection["filter"]), cap=cap)
    return subjects_of_author(session, installation_id, selection["author_reference"], cap=cap)


def dry_run_case(public_reference: str, decision_code: str, maker_id: str) -> ItemCase:
    """A stand-in case for checking that the action can act on each subject before
    anything is recorded (its decision and report are made at submission)."""
    now = iso(utcnow())
    report = {"id": "", "public_reference": public_reference, "external_id": "", "integration_id": "",
              "queue_id": None, "state": "decided", "policy_version_id": None, "category": "bulk"}
    decision = {"id": "", "decision_code": decision_code, "maker_id": maker_id, "created_at": now}
    return ItemCase(report, decision, own_report=False)


def classify_subjects(
    session, installation_id: str, action: BulkAction, subjects: list[SourceSubject], *,
    public_reference: str, maker_id: str, exclude_batch_id: str | None = None, mapping: bool = True,
) -> list[Classified]:
    """Each subject's dry-run outcome (BULK-2): whether the action's mapping and
    component accept it, and where it stands (applied, under way, protected).

    Args:
        mapping: False to classify by standing only, for subjects the same action
            already accepted (a submitted batch's items, whose proposals exist with
            their payloads: BULK-4 re-checks where they stand, not their mapping).
    """
    found = standings(session, installation_id, action.action_code, [s.reference for s in subjects],
                      exclude_batch_id=exclude_batch_id)
    if not mapping:
        return [Classified(s, *classify(found[s.reference])) for s in subjects]
    component = session.get(ComponentVersion, action.component_version_id)
    case = dry_run_case(public_reference, action.decision_code, maker_id)
    run = {"id": "", "workflow_version_id": action.workflow_version_id, "decision_id": "", "created_at": iso(utcnow())}
    classified = []
    for subject in subjects:
        problem = None
        try:
            mapped_item(action, component.input_schema, replace(case, own_report=bool(subject.report_ids)),
                        subject.reference, subject.kind, run)
        except ActionError as error:
            problem = error.code
        outcome, detail = classify(replace(found[subject.reference], problem=problem))
        classified.append(Classified(subject, outcome, detail))
    return classified


def check_reason(value: Any) -> str:
    """The reason of a bulk action or its undo, stripped (BULK-1, BULK-8).

    Raises:
        ApiError: 400 ``bulk_reason_invalid`` unless 3..5,000 characters.
    """
    reason = value.strip() if isinstance(value, str) else ""
    if not 3 <= len(reason) <= MAX_REASON:
        raise ApiError(400, "bulk_reason_invalid", "Give the reason for this bulk action (3 to 5,000 characters).", "reason")
    return reason


def start_dry_run(
    operator: OperatorUser, *, selection: Any, action_key: Any, decision_code: Any, reason: Any
) -> str:
    """Resolve a selection into a stored dry run (BULK-1, BULK-2, BULK-5).

    Args:
        operator: a moderator (the batch's maker).
        selection: {source: list|reports|author, text | filter | author_reference}.
        action_key: ``{workflow_version_id}:{node_id}`` (`bulk_actions`).
        decision_code: a code that workflow is triggered by.
        reason: why, 3..5,000 characters.

    Returns:
        The batch id (state ``dry_run``, expiring after ``BULK_DRY_RUN_SECONDS``).

    Raises:
        SelectionRefused: bad lines of a pasted list (each with its code).
        ApiError: 400 for a bad action, source, filter, reason; an empty selection;
            more subjects than the operator's cap (BULK-5). Nothing is stored.
    """
    checked = check_selection(selection)
    reason = check_reason(reason)
    with unit_of_work() as uow:
        session = uow.session
        action = load_action(session, operator.installation_id, action_key, decision_code)
        subjects = resolve_selection(session, operator.installation_id, checked, operator_cap(session, operator))
        batch_id, public_reference = new_id("blk"), "B-" + secrets.token_hex(4).upper()
        classified = classify_subjects(session, operator.installation_id, action, subjects,
                                       public_reference=public_reference, maker_id=operator.id)
        counts = {outcome.value: 0 for outcome in Outcome}
        for item in classified:
            counts[item.outcome.value] += 1
        digest = dry_run_digest(
            action.as_dict(), ((i, c.subject.reference, c.subject.kind, c.outcome.value) for i, c in enumerate(classified))
        )
        now = utcnow()
        session.add(BulkBatch(
            id=batch_id, installation_id=operator.installation_id, public_reference=public_reference,
            selection=checked, workflow_version_id=action.workflow_version_id, node_id=action.node_id,
            component_version_id=action.component_version_id, action_code=action.action_code,
            decision_code=action.decision_code, reason=reason, maker_id=operator.id, dry_run_digest=digest,
            counts=counts, item_count=counts[Outcome.WOULD_ACT.value],
            expires_at=now + timedelta(seconds=current_app.config["BULK_DRY_RUN_SECONDS"]),
            created_at=now, updated_at=now,
        ))
        session.flush()
        insert_items(session, operator.installation_id, batch_id, classified, now)
        uow.audit(operator.installation_id, f"bulk-dry-run:{batch_id}", "bulk.dry_run", Actor("operator", operator.id),
                  "bulk_batch", batch_id,
                  {"dry_run_digest": digest, "counts": counts, "source": checked["source"], "action": action.as_dict()})
        uow.commit()
    return batch_id


def insert_items(session, installation_id: str, batch_id: str, classified: list[Classified], now) -> None:
    """The batch's items in one statement (10,000 items in one round trip)."""
    rows = [
        dict(id=new_id("bki"), installation_id=installation_id, batch_id=batch_id, position=position,
             subject_reference=c.subject.reference, kind=c.subject.kind, line=c.subject.line,
             outcome=c.outcome.value, detail=c.detail, report_ids=list(c.subject.report_ids), created_at=now)
        for position, c in enumerate(classified)
    ]
    insert_rows(session, BulkItem, rows)
