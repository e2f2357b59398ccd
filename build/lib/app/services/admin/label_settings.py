"""Labels for codes, per installation (SPEC REV-3): read them for the pages, and
let an admin propose setting or resetting one, applied when a second admin approves
(FOUR-4; audited)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.config_changes import ChangeKind
from app.domain.errors import ApiError
from app.domain.labels import DEFAULT_LABELS, KINDS, label_for, label_problem
from app.extensions import db
from app.models import CodeLabel, OperatorUser
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, submit
from app.services.uow import UnitOfWork, unit_of_work


def configured_labels(installation_id: str) -> dict[tuple[str, str], str]:
    """The installation's own labels by (kind, code): one query."""
    rows = db.session.execute(
        select(CodeLabel.kind, CodeLabel.code, CodeLabel.label).where(CodeLabel.installation_id == installation_id)
    ).all()
    return {(kind, code): label for kind, code, label in rows}


@dataclass(frozen=True)
class LabelRow:
    kind: str
    code: str
    label: str
    default: str
    custom: bool


def label_table(installation_id: str) -> dict[str, list[LabelRow]]:
    """Every known code by kind, with its label and its default, for the admin screen."""
    configured = configured_labels(installation_id)
    table: dict[str, list[LabelRow]] = {}
    for kind in KINDS:
        codes = sorted(set(DEFAULT_LABELS.get(kind, {})) | {c for k, c in configured if k == kind})
        table[kind] = [
            LabelRow(
                kind, code, label_for(configured, kind, code), label_for({}, kind, code), (kind, code) in configured
            )
            for code in codes
        ]
    return table


def _current(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    kind, code = content["kind"], content["code"]
    row = session.scalar(
        select(CodeLabel).where(
            CodeLabel.installation_id == installation_id, CodeLabel.kind == kind, CodeLabel.code == code
        )
    )
    return {"code": f"{kind} {code}", "label": label_for({(kind, code): row.label} if row else {}, kind, code)}


def _apply(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], _secrets) -> dict[str, Any]:
    kind, code, label = content["kind"], content["code"], content["label"]
    installation_id = context.installation_id
    session = uow.session
    row = session.scalar(
        select(CodeLabel).where(
            CodeLabel.installation_id == installation_id, CodeLabel.kind == kind, CodeLabel.code == code
        )
    )
    previous = row.label if row else None
    if (previous or "") != label:
        now = utcnow()
        if not label:
            session.delete(row)
        elif row is None:
            session.add(
                CodeLabel(
                    installation_id=installation_id,
                    kind=kind,
                    code=code,
                    label=label,
                    updated_by=context.actor.id,
                )
            )
        else:
            row.label, row.updated_by = label, context.actor.id
        uow.audit(
            installation_id,
            f"label-set:{kind}:{code}:{now.isoformat()}",
            "label.changed",
            context.actor,
            "code_label",
            f"{kind}:{code}",
            context.details({"kind": kind, "code": code, "label": label or None, "previous": previous}),
        )
    return {"kind": kind, "code": code}


LABEL_SET = ChangeType(
    kind=ChangeKind.LABEL_SET,
    subject_type="code_label",
    subject=lambda content: f"{content['kind']}:{content['code']}",
    current=_current,
    summary=lambda content, current: (
        f"Label of {content['kind']} {content['code']}: "
        + (f"“{content['label']}”" if content["label"] else "the default")
    ),
    apply=_apply,
    display=lambda content, current: (
        current or {},
        {
            "code": f"{content['kind']} {content['code']}",
            "label": content["label"] or label_for({}, content["kind"], content["code"]),
        },
    ),
)


def set_label(operator: OperatorUser, *, kind: str, code: str, label: str | None) -> PendingChange | None:
    """Propose the label of a code, or its reset to the default when `label` is empty.
    Reviewers decide by labels (a label could rename ``suspend_account`` to "Send a
    friendly warning"), so a label applies only when a second admin approves (FOUR-4).

    Args:
        operator: an admin of the installation.
        kind: one of `app.domain.labels.KINDS`.
        code: the code, e.g. ``approval_required``.
        label: 1..100 characters, or empty/None to go back to the default.

    Returns:
        The `PendingChange` stored, or None when the label is already that.

    Raises:
        ApiError: 400 ``label_invalid`` naming the field at fault (REV-3).
    """
    label = (label or "").strip()
    problem = label_problem(kind, code, label or "x")
    if problem:
        raise ApiError(400, "label_invalid", problem[1], problem[0])
    with unit_of_work() as uow:
        row = uow.session.scalar(
            select(CodeLabel).where(
                CodeLabel.installation_id == operator.installation_id, CodeLabel.kind == kind, CodeLabel.code == code
            )
        )
        if ((row.label if row else None) or "") == label:
            return None
        outcome = submit(uow, operator, LABEL_SET, {"kind": kind, "code": code, "label": label})
        uow.commit()
    return outcome
