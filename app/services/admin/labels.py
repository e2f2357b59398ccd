"""Labels for codes, per installation (SPEC REV-3): read them for the pages, and
let an admin set or reset one (audited)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.clock import utcnow
from app.domain.errors import ApiError
from app.domain.labels import DEFAULT_LABELS, KINDS, label_for, label_problem
from app.extensions import db
from app.models import CodeLabel, OperatorUser
from app.services.uow import Actor, unit_of_work


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


def set_label(operator: OperatorUser, *, kind: str, code: str, label: str | None) -> str:
    """Set the label of a code, or reset it to the default when `label` is empty.

    Args:
        operator: an admin of the installation.
        kind: one of `app.domain.labels.KINDS`.
        code: the code, e.g. ``approval_required``.
        label: 1..100 characters, or empty/None to go back to the default.

    Returns:
        The label now shown for the code.

    Raises:
        ApiError: 400 ``label_invalid`` naming the field at fault (REV-3).
    """
    label = (label or "").strip()
    problem = label_problem(kind, code, label or "x")
    if problem:
        raise ApiError(400, "label_invalid", problem[1], problem[0])
    with unit_of_work() as uow:
        session = uow.session
        row = session.scalar(
            select(CodeLabel).where(
                CodeLabel.installation_id == operator.installation_id, CodeLabel.kind == kind, CodeLabel.code == code
            )
        )
        previous = row.label if row else None
        if (previous or "") == label:
            return label_for({(kind, code): label} if label else {}, kind, code)
        now = utcnow()
        if not label:
            session.delete(row)
        elif row is None:
            session.add(
                CodeLabel(
                    installation_id=operator.installation_id,
                    kind=kind,
                    code=code,
                    label=label,
                    updated_by=operator.id,
                    updated_at=now,
                )
            )
        else:
            row.label, row.updated_by, row.updated_at = label, operator.id, now
        uow.audit(
            operator.installation_id,
            f"label-set:{kind}:{code}:{now.isoformat()}",
            "label.changed",
            Actor("operator", operator.id),
            "code_label",
            f"{kind}:{code}",
            {"kind": kind, "code": code, "label": label or None, "previous": previous},
        )
        uow.commit()
    return label_for({(kind, code): label} if label else {}, kind, code)
