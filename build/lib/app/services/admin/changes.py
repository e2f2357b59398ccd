"""Four-eyes for configuration (SPEC FOUR-2, FOUR-4): every configuration write that
can change what an action does, where it goes, how its answer is read, who may act or
who may speak for a platform is stored pending instead of applied.

Each admin service describes its changes as a `ChangeType`: how to read what the
change replaces, and how to apply it inside a unit of work. `submit` asks the domain
(`app.domain.config_changes.second_admin_reasons`) whether the change needs a second
admin; if not (the harmless cases of `SINGLE_ADMIN_WRITES`) it applies at once; if so
it tries the change in a savepoint (so a pending change is one that would apply now),
rolls that back and
stores the change with the digest of its exact content. `app.services.admin.reviews`
approves, rejects and break-glasses stored changes through the same `apply`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from app.domain.config_changes import ChangeKind, ChangeState, second_admin_reasons
from app.domain.digests import json_digest, sha256_digest
from app.models import ConfigChange, OperatorUser, new_id
from app.services.uow import Actor, UnitOfWork


@dataclass(frozen=True)
class ApplyContext:
    """For whom a change is applied: the installation, the proposer (the actor of the
    admin audit rows), and the stored change's id (None when applied at once)."""

    installation_id: str
    actor: Actor
    change_id: str | None = None

    def details(self, details: dict[str, Any]) -> dict[str, Any]:
        """Audit details, naming the configuration change they come from."""
        return details if self.change_id is None else {**details, "config_change_id": self.change_id}


Side = dict[str, Any]
Display = Callable[[Side, Side | None], tuple[Side, Side]]


@dataclass(frozen=True)
class ChangeType:
    """How one kind of configuration change reads the present and applies itself.

    A declaration names only what differs between kinds: a creation leaves out
    `subject` and `current`; a change of an existing row names the content key that
    holds the row's id.

    Attributes:
        kind: the `ChangeKind`.
        subject_type: what it changes (``workflow_definition``, ``budget``, ...).
        summary: (content, current) -> one line for lists.
        apply: (uow, context, content, secrets) -> what it created (ids). Validates
            the content against the database as it is now, writes, audits; raises
            `ApiError` and writes nothing when the change cannot apply.
        subject: the content key holding the changed row's id (left out of the
            diff); None for a creation (no id yet); or (content) -> the id, for a
            subject named by several keys (a label's kind and code).
        current: (session, installation id, content) -> what the change replaces, in
            the terms of `second_admin_reasons` and of the diff; None when nothing
            is replaced (a creation). Raises the 404 `ApiError` of a subject that
            is not the installation's.
        hidden: more content keys the diff leaves out (ids, secret digests).
        display: (content, current) -> (now, proposed) for the diff, when the
            content's terms are not the page's (a connection's secrets); see `setting`.
        deliver: (shown_once) -> what to tell the approving admin, for a change whose
            `apply` returns a ``shown_once`` entry (an invitation token, FOUR-6): run
            after the change committed; ``shown_once`` itself is never stored.
        names: (session, side) -> the side with ids named for people (FOUR-10:
            hosts and paths, component names), applied to both sides of the diff.
    """

    kind: ChangeKind
    subject_type: str
    summary: Callable[[Side, Side | None], str]
    apply: Callable[[UnitOfWork, ApplyContext, Side, dict[str, str]], Side]
    subject: str | Callable[[Side], str] | None = None
    current: Callable[[Session, str, Side], Side | None] | None = None
    hidden: tuple[str, ...] = ()
    display: Display | None = None
    deliver: Callable[[Side], Side] | None = None
    names: Callable[[Session, Side], Side] | None = None

    def subject_id(self, content: Side) -> str | None:
        """The id of the row the change is about (None for a creation)."""
        if self.subject is None or isinstance(self.subject, str):
            return content[self.subject] if self.subject else None
        return self.subject(content)

    def replaced(self, session: Session, installation_id: str, content: Side) -> Side | None:
        """What the change replaces now (None for a creation); see `current`."""
        return None if self.current is None else self.current(session, installation_id, content)

    def diff_sides(self, content: Side, current: Side | None, session: Session | None = None) -> tuple[Side, Side]:
        """(now, proposed) as the change page compares them; with a session, ids named (FOUR-10)."""
        if self.display is not None:
            now, proposed = self.display(content, current)
        else:
            hidden = {*self.hidden, "secret_digests", *([self.subject] if isinstance(self.subject, str) else [])}
            now, proposed = dict(current or {}), {key: value for key, value in content.items() if key not in hidden}
        if self.names is not None and session is not None:
            now, proposed = self.names(session, now), self.names(session, proposed)
        return now, proposed


def setting(field: str, value: Any) -> Display:
    """The display of a change that sets one field of its subject (reactivate, retire):
    the subject as it is now, and the same with `field` set to `value`."""
    return lambda content, current: (dict(current or {}), {**(current or {}), field: value})


@dataclass(frozen=True)
class PendingChange:
    """A change stored for a second admin: nothing it describes exists yet.

    Attributes:
        shown_once: secrets generated for it (a signing secret), shown to the
            proposer on this answer only.
    """

    change_id: str
    digest: str
    reasons: list[str]
    shown_once: dict[str, str] = field(default_factory=dict)


def secret_digests(secrets: dict[str, str]) -> dict[str, str]:
    """Digests of new secrets, for a change's content (the secrets stay out of it)."""
    return {name: sha256_digest(value) for name, value in sorted(secrets.items())}


def change_digest(change_id: str, installation_id: str, kind: str, subject_id: str | None, content: dict) -> str:
    """The digest an approving admin confirms (FOUR-2): ``sha256:`` over the canonical
    JSON (RFC 8785) of {schema_version "1", change_id, installation_id, kind,
    subject_id, content}."""
    return json_digest(
        {
            "schema_version": "1",
            "change_id": change_id,
            "installation_id": installation_id,
            "kind": kind,
            "subject_id": subject_id,
            "content": content,
        }
    )


class _DryRun(Exception):
    """Raised inside the trial savepoint to undo the trial."""


def submit(
    uow: UnitOfWork,
    operator: OperatorUser,
    change: ChangeType,
    content: dict[str, Any],
    secrets: dict[str, str] | None = None,
    shown_once: dict[str, str] | None = None,
) -> dict[str, Any] | PendingChange:
    """Apply a configuration change at once, or store it for a second admin (FOUR-2).

    Runs in the caller's unit of work; the caller commits.

    Args:
        uow: the unit of work.
        operator: the admin making the change.
        change: its `ChangeType`.
        content: JSON-compatible content, already cleaned by the caller (no secret
            values: put those in `secrets` and their `secret_digests` in the content).
        secrets: new secret values the change needs when applied.
        shown_once: secrets to show the proposer once if the change is stored.

    Returns:
        What `change.apply` returned when it applied at once, else a `PendingChange`.

    Raises:
        ApiError: whatever `change.current` or `change.apply` refuses (nothing is
            stored then).
    """
    installation_id = operator.installation_id
    actor = Actor("operator", operator.id)
    secrets = secrets or {}
    current = change.replaced(uow.session, installation_id, content)
    reasons = second_admin_reasons(change.kind, content, current)
    if not reasons:
        return change.apply(uow, ApplyContext(installation_id, actor), content, secrets)
    _try(uow, change, ApplyContext(installation_id, actor), content, secrets)
    row = store(uow, operator, change, content, secrets, reasons, current)
    return PendingChange(row.id, row.digest, reasons, dict(shown_once or {}))


def _try(uow: UnitOfWork, change: ChangeType, context: ApplyContext, content: dict, secrets: dict) -> None:
    """Apply the change in a savepoint and undo it: a change that cannot apply now is refused now."""
    try:
        with uow.savepoint():
            change.apply(uow, context, content, secrets)
            raise _DryRun
    except _DryRun:
        pass


def store(
    uow: UnitOfWork,
    operator: OperatorUser,
    change: ChangeType,
    content: dict[str, Any],
    secrets: dict[str, str],
    reasons: list[str],
    current: dict[str, Any] | None,
) -> ConfigChange:
    """Store a pending change and audit ``config.change_proposed`` (FOUR-2)."""
    installation_id = operator.installation_id
    change_id = new_id("cfg")
    subject_id = change.subject_id(content)
    row = ConfigChange(
        id=change_id,
        installation_id=installation_id,
        kind=change.kind.value,
        subject_type=change.subject_type,
        subject_id=subject_id,
        summary=change.summary(content, current)[:500],
        content=content,
        digest=change_digest(change_id, installation_id, change.kind.value, subject_id, content),
        reasons=reasons,
        secrets=secrets or None,
        proposed_by=operator.id,
        state=ChangeState.PENDING.value,
    )
    uow.session.add(row)
    uow.session.flush()
    uow.audit(
        installation_id,
        f"config:change-proposed:{row.id}",
        "config.change_proposed",
        Actor("operator", operator.id),
        "config_change",
        row.id,
        {
            "kind": row.kind,
            "subject_type": row.subject_type,
            "subject_id": subject_id,
            "summary": row.summary,
            "digest": row.digest,
            "reasons": reasons,
        },
    )
    return row
