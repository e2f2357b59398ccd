"""Configuration changes that need a second admin (SPEC FOUR-2), and the rule that a
connection moved to another origin cannot keep its secrets (SEC-4).

A change that would let one person act alone or beyond a budget is stored pending
and applied only when another admin approves it. Which changes those are is decided
here, once, from plain values: the proposed content and the current state of what
it changes. Everything else (lowering a budget, a human-mode version, removing a
role) applies at once.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from app.domain.maker_checker import Verdict

ADMIN_ROLE = "admin"
# Roles whose holders decide on their own: a reviewer approves actions, an admin approves changes.
PRIVILEGED_ROLES = frozenset({"reviewer", "admin"})
DEFAULT_PORTS = {"http": 80, "https": 443}


class ChangeKind(StrEnum):
    """What a configuration change does; each names the content it carries (see
    `second_admin_reasons`)."""

    WORKFLOW_CREATE = "workflow.create"
    WORKFLOW_VERSION = "workflow.version"
    COMPONENT_CREATE = "component.create"
    COMPONENT_VERSION = "component.version"
    CONNECTION_VERSION = "connection.version"
    BUDGET_LIMIT = "budget.limit"
    BUDGET_ACTIVE = "budget.active"
    OPERATOR_CREATE = "operator.create"
    OPERATOR_ROLES = "operator.roles"
    OPERATOR_INVITE = "operator.invite"


class ChangeState(StrEnum):
    """A stored change: ``pending`` until decided. Approval moves it to ``approved``
    and, in the same transaction, applying it to ``applied``; so a committed row is
    pending, rejected or applied."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    APPLIED = "applied"


def origin(url: str) -> tuple[str, str, int | None]:
    """The origin of a URL: (scheme, host, port), lowercase, the scheme's default port filled in."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port if port is not None else DEFAULT_PORTS.get(scheme)


def origin_text(url: str) -> str:
    """An origin as people write it, e.g. ``https://api.example.com:443``."""
    scheme, host, port = origin(url)
    return f"{scheme}://{host}:{port}"


def secrets_need_reentry(previous_url: str, new_url: str) -> bool:
    """Whether a connection version at `new_url` must have its secrets entered again
    instead of keeping those of the version at `previous_url` (SEC-4): the origin
    (scheme, host, port) differs."""
    return origin(previous_url) != origin(new_url)


def _secret_changed(action: str, currently_set: bool) -> bool:
    """A secret changes unless it is kept, or removed where there was none."""
    return action not in ("keep", "none") or (action == "none" and currently_set)


def second_admin_reasons(
    kind: ChangeKind | str, proposed: Mapping[str, Any], current: Mapping[str, Any] | None
) -> list[str]:
    """Why a configuration change needs a second admin before it applies (FOUR-2).

    Args:
        kind: a `ChangeKind` (or its value).
        proposed: the change's content. By kind: workflow.* ``authority_mode``;
            component.* ``approval_mode``; connection.version ``base_url``,
            ``allowed_hosts`` (list), ``bearer_token`` and ``signing_secret`` (the
            action: keep, set/generate, none); budget.limit ``limit_amount``;
            budget.active ``active``; operator.create and operator.roles ``roles``;
            operator.invite ``delivery`` (``mail`` to the invitee, or ``approver``).
        current: what the change replaces, in the same terms (None for a creation).
            connection.version: ``base_url``, ``allowed_hosts``, and ``bearer_token``
            / ``signing_secret`` as booleans (set or not); budget.*: ``limit_amount``,
            ``active``; operator.roles: ``roles``.

    Returns:
        One sentence per reason, for the change page; empty when the change applies at once.

    Raises:
        ValueError: for an unknown kind.
    """
    kind = ChangeKind(kind)
    current = current or {}
    if kind in (ChangeKind.WORKFLOW_CREATE, ChangeKind.WORKFLOW_VERSION):
        if proposed.get("authority_mode") == "bounded_auto":
            return ["It publishes a bounded_auto workflow version: its actions run without a second person."]
        return []
    if kind in (ChangeKind.COMPONENT_CREATE, ChangeKind.COMPONENT_VERSION):
        if proposed.get("approval_mode") == "bounded_auto":
            return ["It publishes a bounded_auto component version: its actions run without a second person."]
        return []
    if kind is ChangeKind.CONNECTION_VERSION:
        return _connection_reasons(proposed, current)
    if kind is ChangeKind.BUDGET_LIMIT:
        before, after = current.get("limit_amount"), proposed.get("limit_amount")
        if isinstance(before, int) and isinstance(after, int) and after > before:
            return [f"It raises a budget's limit from {before} to {after}."]
        return []
    if kind is ChangeKind.BUDGET_ACTIVE:
        if current.get("active") and not proposed.get("active"):
            return ["It deactivates a budget: its scope is no longer bounded."]
        return []
    if kind is ChangeKind.OPERATOR_INVITE:  # FOUR-6: a link someone other than the invitee sees
        if proposed.get("delivery") != "mail":
            return [
                "It issues a new invitation link, shown to the approving admin: whoever holds it sets the password."
            ]
        return []
    # operator.create and operator.roles: what the change adds of the privileged roles
    granted = PRIVILEGED_ROLES.intersection(proposed.get("roles") or ()) - set(current.get("roles") or ())
    reasons = []
    if kind is ChangeKind.OPERATOR_CREATE:  # FOUR-6: every account is created by two admins
        reasons.append("It creates an account, which a second admin confirms.")
    if granted:
        reasons.append(f"It grants the {' and '.join(sorted(granted))} role{'s' if len(granted) > 1 else ''}.")
    return reasons


def _connection_reasons(proposed: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    reasons = []
    if current.get("base_url") and origin(current["base_url"]) != origin(proposed.get("base_url", "")):
        reasons.append(
            f"It moves the destination from {origin_text(current['base_url'])} "
            f"to {origin_text(proposed.get('base_url', ''))}."
        )
    if sorted(current.get("allowed_hosts") or []) != sorted(proposed.get("allowed_hosts") or []):
        reasons.append("It changes the allowed hosts.")
    for name, label in (("bearer_token", "bearer token"), ("signing_secret", "signing secret")):
        if _secret_changed(proposed.get(name, "keep"), bool(current.get(name))):
            reasons.append(f"It changes the {label}.")
    return reasons


def change_approver_verdict(
    approver_id: str, approver_roles: Iterable[str], proposer_id: str, subject_operator_id: str | None = None
) -> Verdict:
    """Whether an operator may approve a pending configuration change (FOUR-2).

    Args:
        approver_id: the operator who wants to approve.
        approver_roles: their roles.
        proposer_id: the admin who proposed the change.
        subject_operator_id: for a change of an operator's roles, that operator
            (nobody approves a grant to themselves).

    Returns:
        A `Verdict`; when refused, its reason is a sentence for the console.
    """
    if ADMIN_ROLE not in set(approver_roles):
        return Verdict(False, "Only admins can approve configuration changes.")
    if approver_id == proposer_id:
        return Verdict(False, "You proposed this change; a second admin must approve it.")
    if subject_operator_id is not None and approver_id == subject_operator_id:
        return Verdict(False, "This change grants you a role; another admin must approve it.")
    return Verdict(True)


@dataclass(frozen=True)
class FieldChange:
    """One field of a change against the current state, for the diff on the change page.

    Attributes:
        lines: for JSON objects and lists, a unified diff of their pretty-printed
            text (empty otherwise).
    """

    name: str
    before: Any
    after: Any
    lines: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.before != self.after


_MISSING = None


def content_diff(current: Mapping[str, Any] | None, proposed: Mapping[str, Any]) -> list[FieldChange]:
    """Field by field, what the change would set against what holds now.

    Args:
        current: the present values (None for a creation: every field is new).
        proposed: the values the change would set.

    Returns:
        One `FieldChange` per field the change sets, in the proposed content's order
        (what the change leaves alone is not listed).
    """
    current = current or {}
    changes = []
    for name in proposed:
        before, after = current.get(name, _MISSING), proposed.get(name, _MISSING)
        lines: tuple[str, ...] = ()
        if before != after and (isinstance(before, dict | list) or isinstance(after, dict | list)):
            lines = tuple(difflib.unified_diff(_pretty(before), _pretty(after), "now", "proposed", lineterm="", n=2))
        changes.append(FieldChange(name, before, after, lines))
    return changes


def _pretty(value: Any) -> list[str]:
    if value is None:
        return []
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
