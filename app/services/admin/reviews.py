"""Deciding stored configuration changes (SPEC FOUR-2): the pending list and history,
a change with its diff against what holds now, approval by a second admin bound to
the change's digest, rejection, and the CLI's break-glass.

Approval and break-glass apply the change through its admin service's own `apply`
(`app.services.admin.changes.ChangeType`) in the same transaction as the decision,
so the change and its record commit together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update

from app.domain.clock import utcnow
from app.domain.config_changes import (
    ChangeKind,
    ChangeState,
    FieldChange,
    change_approver_verdict,
    content_diff,
)
from app.domain.errors import ApiError
from app.domain.maker_checker import Verdict
from app.domain.reasons import reason_problem
from app.extensions import db
from app.models import ConfigChange, OperatorUser
from app.secret_box import UnreadableSecret
from app.services.admin import (
    approval_policies,
    budgets,
    bulk_caps,
    components,
    connection_create,
    connections,
    dsa_config,
    invitations,
    label_settings,
    mfa,
    operator_changes,
    operator_teams,
    operators,
    protected_subjects,
    sso_mapping,
    token_changes,
    version_retirement,
    workflows,
)
from app.services.admin.changes import ApplyContext, ChangeType
from app.services.admin.input import plausible_id
from app.services.uow import Actor, UnitOfWork, unit_of_work

CHANGE_TYPES: dict[str, ChangeType] = {
    change.kind.value: change
    for change in (
        workflows.WORKFLOW_CREATE,
        workflows.WORKFLOW_VERSION,
        components.COMPONENT_CREATE,
        components.COMPONENT_VERSION,
        connections.CONNECTION_VERSION,
        budgets.BUDGET_LIMIT,
        budgets.BUDGET_ACTIVE,
        operators.OPERATOR_CREATE,
        operators.OPERATOR_ROLES,
        invitations.OPERATOR_INVITE,
        workflows.WORKFLOW_ACTIVE,
        version_retirement.COMPONENT_RETIRE,
        connection_create.CONNECTION_CREATE,
        budgets.BUDGET_CREATE,
        token_changes.INTEGRATION_TOKEN,
        label_settings.LABEL_SET,
        operator_changes.OPERATOR_REACTIVATE,
        bulk_caps.BULK_CAP,
        mfa.SECOND_FACTOR_RESET,
        sso_mapping.SSO_MAPPING,
        approval_policies.APPROVAL_SETTINGS,
        operator_teams.OPERATOR_ATTRIBUTES,
        protected_subjects.SUBJECT_PROTECT,
        protected_subjects.SUBJECT_UNPROTECT,
        dsa_config.DSA_SETTINGS,
    )
}
MAX_REASON = 2000
HISTORY_LIMIT = 200
P = ConfigChange


@dataclass(frozen=True)
class ChangeRow:
    """A change for the lists, with its people named."""

    change: ConfigChange
    proposer: str
    decider: str | None


@dataclass(frozen=True)
class ChangeDetail:
    """A change for its page.

    Attributes:
        diff: field by field, what it would set against what holds now (pending), or
            what it set (decided: the values of then, without a comparison).
        current_error: why what it changes cannot be read now (e.g. deleted), if so.
        verdict: whether the viewer may approve it, with the reason when not.
    """

    row: ChangeRow
    diff: list[FieldChange]
    current_error: ApiError | None
    verdict: Verdict

    @property
    def change(self) -> ConfigChange:
        return self.row.change


def _names(installation_id: str, ids: set[str]) -> dict[str, str]:
    ids = {i for i in ids if i}
    if not ids:
        return {}
    rows = db.session.execute(
        select(OperatorUser.id, OperatorUser.display_name, OperatorUser.email).where(
            OperatorUser.installation_id == installation_id, OperatorUser.id.in_(ids)
        )
    )
    return {row.id: f"{row.display_name} ({row.email})" for row in rows}


def _rows(installation_id: str, changes: list[ConfigChange]) -> list[ChangeRow]:
    names = _names(installation_id, {c.proposed_by for c in changes} | {c.decided_by for c in changes})
    return [
        ChangeRow(c, names.get(c.proposed_by, c.proposed_by), names.get(c.decided_by) if c.decided_by else None)
        for c in changes
    ]


def pending_count(installation_id: str) -> int:
    """How many changes of the installation wait for a second admin."""
    return db.session.scalar(
        select(func.count()).where(P.installation_id == installation_id, P.state == ChangeState.PENDING.value)
    )


def list_changes(installation_id: str) -> tuple[list[ChangeRow], list[ChangeRow]]:
    """The installation's pending changes (oldest first) and decided ones (newest
    first, the last 200)."""
    pending = db.session.scalars(
        select(P)
        .where(P.installation_id == installation_id, P.state == ChangeState.PENDING.value)
        .order_by(P.created_at, P.id)
    ).all()
    decided = db.session.scalars(
        select(P)
        .where(P.installation_id == installation_id, P.state != ChangeState.PENDING.value)
        .order_by(P.decided_at.desc(), P.id)
        .limit(HISTORY_LIMIT)
    ).all()
    return _rows(installation_id, list(pending)), _rows(installation_id, list(decided))


def _owned(session, installation_id: str, change_id: Any) -> ConfigChange:
    change = session.get(ConfigChange, change_id) if plausible_id(change_id) else None
    if change is None or change.installation_id != installation_id:
        raise ApiError(404, "config_change_not_found", "No such configuration change.")
    return change


def _verdict(viewer: OperatorUser, change: ConfigChange) -> Verdict:
    if change.kind == ChangeKind.OPERATOR_ATTRIBUTES.value and viewer.id == change.subject_id:  # POL-1
        return Verdict(False, "This change sets your own team or attributes; another admin must approve it.")
    subject = change.subject_id if change.kind == ChangeKind.OPERATOR_ROLES.value else None
    return change_approver_verdict(viewer.id, viewer.roles, change.proposed_by, subject)


def change_detail(viewer: OperatorUser, change_id: str) -> ChangeDetail:
    """A change of the viewer's installation, with its diff and whether the viewer may approve it.

    Raises:
        ApiError: 404 ``config_change_not_found`` (also for another installation's).
    """
    change = _owned(db.session, viewer.installation_id, change_id)
    change_type = CHANGE_TYPES[change.kind]
    content, current, error = change.content, None, None
    if change.state == ChangeState.PENDING.value:
        try:
            current = change_type.replaced(db.session, change.installation_id, content) or {}
        except ApiError as refused:
            error = refused
    before, after = change_type.diff_sides(content, current, db.session)
    if change.state != ChangeState.PENDING.value:
        before = None  # what held before is in the audit trail; the page shows what it set
    [row] = _rows(viewer.installation_id, [change])
    return ChangeDetail(row, content_diff(before, after), error, _verdict(viewer, change))


def _claim(uow: UnitOfWork, change: ConfigChange, state: ChangeState, values: dict[str, Any], **where) -> None:
    """Move a pending change on with one guarded UPDATE: exactly one decision lands.

    Raises:
        ApiError: 409 ``config_change_changed`` when another decision came first.
    """
    conditions = [P.id == change.id, P.state == ChangeState.PENDING.value]
    conditions += [getattr(P, column) == value for column, value in where.items()]
    statement = (
        update(P)
        .where(*conditions)
        .values(state=state.value, decided_at=utcnow(), **values)
        .execution_options(synchronize_session=False)
    )
    if uow.session.execute(statement).rowcount != 1:
        raise ApiError(409, "config_change_changed", "This change was decided a moment ago. Reload the page.")


def _require_pending(change: ConfigChange) -> None:
    if change.state != ChangeState.PENDING.value:
        raise ApiError(409, "config_change_not_pending", f"This change is {change.state} already.")


def _apply(uow: UnitOfWork, change: ConfigChange) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Apply the change as its proposer made it; mark it applied; forget its secrets.

    Returns:
        What it created (ids, stored on the change), and what only the approver may
        be handed after commit (``shown_once``: an invitation token, FOUR-6; never stored).
    """
    change_type = CHANGE_TYPES[change.kind]
    secrets = _opened_secrets(change)
    context = ApplyContext(change.installation_id, Actor("operator", change.proposed_by), change.id)
    result = change_type.apply(uow, context, change.content, secrets)
    shown_once = result.pop("shown_once", None)
    uow.session.execute(
        update(P)
        .where(P.id == change.id)
        .values(state=ChangeState.APPLIED.value, result=result, secrets=None)
        .execution_options(synchronize_session=False)
    )
    return result, shown_once


def _opened_secrets(change: ConfigChange) -> dict[str, Any]:
    """The change's new secrets, opened (OPS-3).

    Raises:
        ApiError: 409 ``config_change_secrets_unreadable`` when they were sealed under
            a key this process does not have (SECRETS_KEY, SECRETS_KEY_PREVIOUS).
    """
    if isinstance(change.secrets, UnreadableSecret):
        raise ApiError(
            409,
            "config_change_secrets_unreadable",
            "This change's secrets were sealed under a key the console no longer has "
            "(SECRETS_KEY, SECRETS_KEY_PREVIOUS). Configure that key again, or reject the change and propose it anew.",
        )
    return change.secrets or {}


def _deliver(change_kind: str, shown_once: dict[str, Any] | None) -> dict[str, Any]:
    """After commit: hand what the change produced for one person only to them (FOUR-6)."""
    deliver = CHANGE_TYPES[change_kind].deliver
    return deliver(shown_once) if shown_once and deliver else {}


def _audit_details(change: ConfigChange, **extra: Any) -> dict[str, Any]:
    return {
        "kind": change.kind,
        "subject_type": change.subject_type,
        "subject_id": change.subject_id,
        "digest": change.digest,
        "proposed_by": change.proposed_by,
        **extra,
    }


def approve_change(operator: OperatorUser, change_id: str, digest: str) -> dict[str, Any]:
    """A second admin approves a pending change, which applies in the same transaction (FOUR-2).

    Args:
        operator: the approving admin (not the proposer; not the operator a role
            change is for).
        change_id: the change.
        digest: the digest the admin confirmed (``sha256:…`` shown on its page).

    Returns:
        What applying it created (ids), and for an account or a new invitation
        (FOUR-6) ``invitation_link`` (to show this once: mail not configured),
        ``invitation_sent_to`` or ``invitation_mail_failed``.

    Raises:
        ApiError: 404 ``config_change_not_found``; 409 ``config_change_not_pending``;
            403 ``forbidden`` (not an admin), ``maker_checker_violation`` (its
            proposer, or the subject of a role change); 409
            ``config_change_digest_mismatch``, ``config_change_changed`` (decided a
            moment ago); any refusal of the change itself as it applies now (e.g.
            409 ``slug_taken``, ``config_change_stale``). Nothing changes then.
    """
    installation_id = operator.installation_id
    approver = Actor("operator", operator.id)
    with unit_of_work() as uow:
        change = _owned(uow.session, installation_id, change_id)
        _require_pending(change)
        verdict = _verdict(operator, change)
        if not verdict:
            code = "forbidden" if not operator.has_role("admin") else "maker_checker_violation"
            raise ApiError(403, code, verdict.reason)
        if not isinstance(digest, str) or digest.strip() != change.digest:
            raise ApiError(
                409,
                "config_change_digest_mismatch",
                "The digest does not match this change. Check that you reviewed this change, then copy its digest.",
                "digest",
            )
        _claim(
            uow,
            change,
            ChangeState.APPROVED,
            {"decided_by": operator.id, "decided_via": "console"},
            digest=change.digest,
        )
        result, shown_once = _apply(uow, change)
        kind = change.kind
        uow.audit(
            installation_id,
            f"config:change-approved:{change.id}",
            "config.change_approved",
            approver,
            "config_change",
            change.id,
            _audit_details(change, result=result),
        )
        uow.commit()
    return {**result, **_deliver(kind, shown_once)}


def _clean_reason(value: Any, minimum: int, code: str) -> str:
    reason = value.strip() if isinstance(value, str) else ""
    if not minimum <= len(reason) <= MAX_REASON or "\x00" in reason:
        raise ApiError(400, code, f"Give a reason of {minimum} to {MAX_REASON:,} characters.", "reason")
    return reason


def reject_change(operator: OperatorUser, change_id: str, reason: str) -> None:
    """An admin rejects a pending change (its proposer may withdraw it): nothing of it applies.

    Args:
        reason: 3..2,000 characters, shown in the history.

    Raises:
        ApiError: 400 ``config_change_reason_invalid``; 403 ``forbidden``; 404
            ``config_change_not_found``; 409 ``config_change_not_pending``,
            ``config_change_changed``.
    """
    if not operator.has_role("admin"):
        raise ApiError(403, "forbidden", "Only admins can decide configuration changes.")
    reason = _clean_reason(reason, 3, "config_change_reason_invalid")
    installation_id = operator.installation_id
    with unit_of_work() as uow:
        change = _owned(uow.session, installation_id, change_id)
        _require_pending(change)
        _claim(
            uow,
            change,
            ChangeState.REJECTED,
            {"decided_by": operator.id, "decided_via": "console", "reason": reason, "secrets": None},
        )
        uow.audit(
            installation_id,
            f"config:change-rejected:{change.id}",
            "config.change_rejected",
            Actor("operator", operator.id),
            "config_change",
            change.id,
            _audit_details(change, reason=reason),
        )
        uow.commit()


@dataclass(frozen=True)
class BreakGlassOutcome:
    """A change applied by break-glass, and what to tell the server operator (an
    invitation's link or where it was mailed, FOUR-6)."""

    change: ConfigChange
    delivered: dict[str, Any]


def break_glass(
    change_id: str, reason: str, *, digest: str | None = None, invoked_by: dict[str, str] | None = None
) -> BreakGlassOutcome:
    """Apply a pending change without a second admin: the CLI's way round FOUR-2,
    recorded as a ``config.break_glass`` audit row with its reason (FOUR-10).

    Args:
        change_id: the pending change (any installation: the CLI runs on the server).
        reason: a reason of substance (`app.domain.reasons.reason_problem`: 12+
            visible characters in 2+ words, invisible characters not counted; at
            most 2,000), kept on the change and in the audit row.
        digest: when given, the change's digest: anything else is refused.
        invoked_by: who ran the command: ``os_user`` and ``host`` (FOUR-10), kept in
            the audit row's details.

    Returns:
        The change as applied, with what was delivered.

    Raises:
        ApiError: 400 ``break_glass_reason_invalid``; 404 ``config_change_not_found``;
            409 ``config_change_not_pending``, ``config_change_digest_mismatch``,
            ``config_change_changed``; any refusal of the change itself as it applies now.
    """
    problem = reason_problem(reason)
    if problem:
        raise ApiError(400, "break_glass_reason_invalid", problem, "reason")
    reason = reason.strip()
    with unit_of_work() as uow:
        change = uow.session.get(ConfigChange, change_id) if plausible_id(change_id) else None
        if change is None:
            raise ApiError(404, "config_change_not_found", "No such configuration change.")
        _require_pending(change)
        if digest is not None and digest.strip() != change.digest:
            raise ApiError(409, "config_change_digest_mismatch", "The digest does not match this change.", "digest")
        _claim(uow, change, ChangeState.APPROVED, {"decided_via": "break_glass", "reason": reason})
        result, shown_once = _apply(uow, change)
        kind = change.kind
        uow.audit(
            change.installation_id,
            f"config:break-glass:{change.id}",
            "config.break_glass",
            Actor.system("cli-break-glass"),
            "config_change",
            change.id,
            _audit_details(change, reason=reason, result=result, **(invoked_by or {})),
        )
        uow.commit()
    return BreakGlassOutcome(db.session.get(ConfigChange, change_id), _deliver(kind, shown_once))
