"""Configuration changes that need a second admin (SPEC FOUR-2, FOUR-4), and the rule
that a connection moved to another origin cannot keep its secrets (SEC-4).

Every administrative write that can change what an action does, where it goes, how
its answer is read, who may act or who may speak for a platform is stored pending
and applied only when another admin approves it (FOUR-4). Which writes those are is
decided here, once: `second_admin_reasons` from plain values (the proposed content
and the current state of what it changes), `FOUR_EYES_WRITES` for the console's
routes and the CLI's commands. The writes that stay single-admin are the short list
`SINGLE_ADMIN_WRITES`, each with why it is harmless to the promise; commands that
write no configuration are `NOT_CONFIGURATION_WRITES`.
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
from app.domain.text_safety import SuspiciousCharacter, suspicious_in

ADMIN_ROLE = "admin"
# Roles whose holders decide on their own: a reviewer approves actions, an admin approves changes.
# An emergency role acts alone (POL-6): it signs in with a second factor too.
PRIVILEGED_ROLES = frozenset({"reviewer", "admin", "emergency"})
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
    # FOUR-4: the rest of the class
    WORKFLOW_ACTIVE = "workflow.active"
    COMPONENT_RETIRE = "component.retire"
    CONNECTION_CREATE = "connection.create"
    BUDGET_CREATE = "budget.create"
    INTEGRATION_TOKEN = "integration.token"
    LABEL_SET = "label.set"
    OPERATOR_REACTIVATE = "operator.reactivate"
    BULK_CAP = "bulk.cap"  # BULK-5: items per batch for a role
    OPERATOR_SECOND_FACTOR_RESET = "operator.second_factor_reset"  # OPS-2
    SSO_MAPPING = "sso.mapping"  # OPS-1: which identity-provider groups give which roles
    APPROVAL_SETTINGS = "approval.settings"  # POL-1, POL-3: who must approve which actions
    OPERATOR_ATTRIBUTES = "operator.attributes"  # POL-1: an operator's team and attributes (eligibility)
    SUBJECT_PROTECT = "subject.protect"  # POL-4: mark an account or author protected
    SUBJECT_UNPROTECT = "subject.unprotect"  # POL-4: unmark it
    DSA_SETTINGS = "dsa.settings"  # DSA-1: statements of reasons, notices, the Transparency Database


K = ChangeKind
# The console's writes (blueprint endpoint) and the CLI's (``cli:<command>``) that are
# pending changes (FOUR-4), with the kinds they store. An entry also in
# SINGLE_ADMIN_WRITES is four-eyes except for the harmless case named there.
FOUR_EYES_WRITES: dict[str, tuple[ChangeKind, ...]] = {
    "admin.workflow_create": (K.WORKFLOW_CREATE,),
    "admin.workflow_version_create": (K.WORKFLOW_VERSION,),
    "admin.workflow_version_activate": (K.WORKFLOW_ACTIVE,),
    "admin.workflow_version_deactivate": (K.WORKFLOW_ACTIVE,),
    "admin.component_create": (K.COMPONENT_CREATE,),
    "admin.component_version_create": (K.COMPONENT_VERSION,),
    "admin.component_version_retire": (K.COMPONENT_RETIRE,),
    "admin.connection_create": (K.CONNECTION_CREATE,),
    "admin.connection_version_create": (K.CONNECTION_VERSION,),
    "admin.budget_create": (K.BUDGET_CREATE,),
    "admin.budget_limit": (K.BUDGET_LIMIT,),
    "admin.budget_activate": (K.BUDGET_ACTIVE,),
    "admin.budget_deactivate": (K.BUDGET_ACTIVE,),
    "admin.token_issue": (K.INTEGRATION_TOKEN,),
    "admin.label_set": (K.LABEL_SET,),
    "admin.user_create": (K.OPERATOR_CREATE,),
    "admin.user_roles": (K.OPERATOR_ROLES,),
    "admin.user_reactivate": (K.OPERATOR_REACTIVATE,),
    "admin.user_invitation": (K.OPERATOR_INVITE,),
    "admin.bulk_cap_set": (K.BULK_CAP,),
    "admin.user_second_factor_reset": (K.OPERATOR_SECOND_FACTOR_RESET,),
    "admin.sso_mapping_set": (K.SSO_MAPPING,),
    "admin.approval_settings_set": (K.APPROVAL_SETTINGS,),
    "admin.user_attributes": (K.OPERATOR_ATTRIBUTES,),
    "cli:approval-settings": (K.APPROVAL_SETTINGS,),
    "admin.protected_mark": (K.SUBJECT_PROTECT,),
    "admin.protected_unmark": (K.SUBJECT_UNPROTECT,),
    "cli:create-integration-token": (K.INTEGRATION_TOKEN,),
    "cli:bulk-cap": (K.BULK_CAP,),
    "admin.dsa_settings_set": (K.DSA_SETTINGS,),
    "cli:dsa-settings": (K.DSA_SETTINGS,),
}
# The writes that stay single-admin (FOUR-4), each with why it is harmless to the promise.
SINGLE_ADMIN_WRITES: dict[str, str] = {
    "admin.budget_limit": "Lowering a limit (or setting the same one) only tightens an existing bound.",
    "admin.user_roles": "Removing roles only takes power away (granting any role is four-eyes).",
    "admin.user_invitation": (
        "Re-sending an invitation by mail (MAIL_SERVER and PUBLIC_URL set): the link goes to the invitee only,"
        " on PUBLIC_URL whatever host the request names (otherwise it is an operator.invite change)."
    ),
    "admin.user_deactivate": "It only takes power away: the account's sessions end and it cannot sign in.",
    "admin.token_revoke": "Revoking a token only takes a platform's voice away.",
    "admin.integration_create": (
        "An integration grants nothing by itself: it speaks only through a token, and issuing one is four-eyes."
    ),
    "admin.connection_re_enable": (
        "It resumes deliveries already approved, to the destination and with the content already approved."
    ),
    "admin.change_approve": "It is the second admin's approval itself, bound to the change's digest.",
    "admin.change_reject": "Nothing of a rejected change applies.",
    "cli:revoke-integration-token": "Revoking a token only takes a platform's voice away.",
    "cli:config-break-glass": (
        "The one documented way round four-eyes (FOUR-2): it needs a reason and writes a config.break_glass row."
    ),
    "admin.queue_target_set": (
        "A queue's time to decide only marks subjects overdue (QUEUE-4); it changes no action, recipient or role."
    ),
    "cli:queue-target": "A queue's time to decide only marks subjects overdue (QUEUE-4); it changes no action.",
    "admin.erasure_request": (
        "It only stores a request: nothing is erased until a different admin approves it (OPS-4)."
    ),
    "admin.retention_request": (
        "It only stores a request: the retention period changes when a different admin approves it (OPS-4)."
    ),
    "admin.erasure_approve": "It is the second admin's approval of another admin's erasure request (OPS-4).",
    "admin.erasure_reject": "Nothing of a rejected erasure request applies.",
    "cli:create-admin": (
        "Bootstrap from the server: the first admin of an installation, when no second admin exists; "
        "recorded as the system."
    ),
}
# Blueprints whose writes are not configuration, with why (their routes never start with /admin).
NOT_CONFIGURATION_BLUEPRINTS: dict[str, str] = {
    "auth": "Signing in and out.",
    "console": "Case work: decisions, approvals, appeals and retries under the proposal four-eyes rules (FOUR-1).",
    "api": "A platform's intake (reports, appeals, action results) under its token: no configuration.",
}
# CLI commands that write no configuration of an installation, with why.
NOT_CONFIGURATION_WRITES: dict[str, str] = {
    "cli:demo": "Seeds a throw-away demo installation as the system and runs it.",
    "cli:db": "Schema migrations (Alembic), run by the owner role.",
    "cli:sweep": "Runs the periodic sweeps: deliveries, reversals and checkpoints already decided.",
    "cli:verify-audit": "Reads the audit chain.",
    "cli:audit-checkpoint": "Appends a signed checkpoint of the audit chain outside the database.",
    "cli:audit-rekey": "Seals unkeyed audit rows under the chain key; changes no configuration.",
    "cli:proposal-history": "Reads one proposal's history.",
    "cli:config-changes": "Lists the pending changes.",
    "cli:bulk-status": "Reads one bulk batch and its ledger.",
    "cli:backup": "Reads every table into a file; it writes nothing (OPS-6).",
    "cli:restore": (
        "Loads a backup into an empty database at the same migration only (OPS-6): it refuses a database with"
        " rows, so it cannot roll a running installation's configuration back."
    ),
    "cli:erasure-sweep": "Erases only what a retention period two admins approved makes due, as the sweep does (OPS-4).",
    "cli:secrets-status": "Counts the sealed platform secrets per key (OPS-3).",
    "cli:rotate-secrets-key": (
        "Re-seals the stored platform secrets under SECRETS_KEY (OPS-3): every secret and setting keeps its value."
    ),
}


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


ALWAYS: dict[ChangeKind, str] = {
    K.WORKFLOW_CREATE: "It creates a workflow: it decides which actions are proposed for decisions.",
    K.WORKFLOW_VERSION: "It publishes a workflow version: it changes which actions are proposed and how.",
    K.WORKFLOW_ACTIVE: "It changes which workflow version new decisions start.",
    K.COMPONENT_CREATE: "It creates a component: what an action does, where it goes and how its answer is read.",
    K.COMPONENT_VERSION: (
        "It publishes a component version: it changes what an action does, where it goes or how its answer is read."
    ),
    K.COMPONENT_RETIRE: "It retires a component version: actions can no longer be prepared with it.",
    K.CONNECTION_CREATE: "It creates a connection: a new destination for actions, with its secrets.",
    K.CONNECTION_VERSION: "It publishes a connection version: it changes where actions go or how they are sent.",
    K.BUDGET_CREATE: "It creates a budget: automation of its scope may then run up to its limit.",
    K.INTEGRATION_TOKEN: "It issues an integration token: whoever holds it speaks for the platform.",
    K.LABEL_SET: "It changes what a code is called on every page: reviewers decide by the label.",
    K.OPERATOR_CREATE: "It creates an account, which a second admin confirms.",
    K.OPERATOR_REACTIVATE: "It reactivates an account: its holder may sign in and act again.",
    K.OPERATOR_SECOND_FACTOR_RESET: (
        "It resets an account's second factor: whoever knows its password enrols a new device at the next sign-in."
    ),
    K.SSO_MAPPING: (
        "It changes which identity-provider groups give which roles: who may sign in through single sign-on,"
        " and with what power."
    ),
    K.APPROVAL_SETTINGS: (
        "It changes the approval policies and routes: how many people, and who, must approve which actions"
        " before they are sent."
    ),
    K.OPERATOR_ATTRIBUTES: (
        "It changes an operator's team or attributes: which approval factors they may count for."
    ),
    K.SUBJECT_PROTECT: (
        "It marks a subject protected: actions on it then need the protected policy's approvals (POL-4)."
    ),
    K.SUBJECT_UNPROTECT: (
        "It unmarks a protected subject: actions on it then need only the ordinary policy's approvals (POL-4)."
    ),
    K.DSA_SETTINGS: (
        "It changes the DSA settings: which actions get statements of reasons, what they say, what affected"
        " users are told and where statements are submitted (DSA-1)."
    ),
}


def second_admin_reasons(
    kind: ChangeKind | str, proposed: Mapping[str, Any], current: Mapping[str, Any] | None
) -> list[str]:
    """Why a configuration change needs a second admin before it applies (FOUR-2, FOUR-4).

    Every kind needs one, except the harmless cases of `SINGLE_ADMIN_WRITES`: a budget
    limit lowered or kept, a budget set to the state it has, roles only removed.

    Args:
        kind: a `ChangeKind` (or its value).
        proposed: the change's content. By kind: workflow.* ``authority_mode``;
            component.* ``approval_mode``; connection.version ``base_url``,
            ``allowed_hosts`` (list), ``bearer_token`` and ``signing_secret`` (the
            action: keep, set/generate, none); budget.limit ``limit_amount``;
            budget.active ``active``; operator.create and operator.roles ``roles``;
            operator.invite ``delivery`` (``mail`` to the invitee, or ``approver``);
            bulk.cap ``role``, ``max_items`` (BULK-5: raising and lowering both
            need a second admin); other kinds:
            nothing is read.
        current: what the change replaces, in the same terms (None for a creation).
            connection.version: ``base_url``, ``allowed_hosts``, and ``bearer_token``
            / ``signing_secret`` as booleans (set or not); budget.*: ``limit_amount``,
            ``active``; operator.roles: ``roles``; bulk.cap: ``max_items`` (the
            default cap for a role without one).

    Returns:
        One sentence per reason, for the change page (the most specific first);
        empty only when the change may apply at once.

    Raises:
        ValueError: for an unknown kind.
    """
    kind = ChangeKind(kind)
    current = current or {}
    if kind in (ChangeKind.WORKFLOW_CREATE, ChangeKind.WORKFLOW_VERSION):
        if proposed.get("authority_mode") == "bounded_auto":
            return ["It publishes a bounded_auto workflow version: its actions run without a second person."]
        return [ALWAYS[kind]]
    if kind in (ChangeKind.COMPONENT_CREATE, ChangeKind.COMPONENT_VERSION):
        if proposed.get("approval_mode") == "bounded_auto":
            return ["It publishes a bounded_auto component version: its actions run without a second person."]
        return [ALWAYS[kind]]
    if kind is ChangeKind.CONNECTION_VERSION:
        return _connection_reasons(proposed, current) or [ALWAYS[kind]]
    if kind is ChangeKind.BUDGET_LIMIT:
        before, after = current.get("limit_amount"), proposed.get("limit_amount")
        if isinstance(before, int) and isinstance(after, int) and after > before:
            return [f"It raises a budget's limit from {before} to {after}."]
        return []
    if kind is ChangeKind.BUDGET_ACTIVE:
        if current.get("active") and not proposed.get("active"):
            return ["It deactivates a budget: its scope is no longer bounded."]
        if "active" in current and not current["active"] and proposed.get("active"):
            return ["It reactivates a budget: automation of its scope may run again up to its limit."]
        return []
    if kind is ChangeKind.OPERATOR_INVITE:  # FOUR-6: a link someone other than the invitee sees
        if proposed.get("delivery") != "mail":
            return [
                "It issues a new invitation link, shown to the approving admin: whoever holds it sets the password."
            ]
        return []
    if kind in (ChangeKind.OPERATOR_CREATE, ChangeKind.OPERATOR_ROLES):
        granted = set(proposed.get("roles") or ()) - set(current.get("roles") or ())
        reasons = [ALWAYS[kind]] if kind is ChangeKind.OPERATOR_CREATE else []
        if granted:
            reasons.append(f"It grants the {' and '.join(sorted(granted))} role{'s' if len(granted) > 1 else ''}.")
        return reasons
    if kind is ChangeKind.BULK_CAP:
        return _bulk_cap_reasons(proposed, current)
    return [ALWAYS[kind]]


def _bulk_cap_reasons(proposed: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """BULK-5: a cap says how many subjects one reviewed decision may enforce, so both
    directions need a second admin. Raising it lets one approval act on more subjects
    at once; lowering it can stop a team's enforcement in the middle of a wave (a raid
    of 4,000 accounts no longer fits one batch), which one admin must not decide alone."""
    role, before, after = proposed.get("role"), current.get("max_items"), proposed.get("max_items")
    if isinstance(before, int) and isinstance(after, int) and after > before:
        return [f"It raises the items per bulk batch for {role} from {before:,} to {after:,}:"
                " one reviewed decision then enforces more subjects at once."]
    if isinstance(before, int) and isinstance(after, int) and after < before:
        return [f"It lowers the items per bulk batch for {role} from {before:,} to {after:,}:"
                " larger bulk actions of that role are refused, which can stop an enforcement wave."]
    return [f"It sets the items per bulk batch for {role}: how many subjects one reviewed decision may enforce."]


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
        suspicious: lookalike, invisible and bidirectional characters in the value
            it would set (FOUR-10), for a warning on the change page.
    """

    name: str
    before: Any
    after: Any
    lines: tuple[str, ...] = ()
    suspicious: tuple[SuspiciousCharacter, ...] = ()

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
        (what the change leaves alone is not listed), each with the deceiving
        characters of its new value (FOUR-10).
    """
    current = current or {}
    changes = []
    for name in proposed:
        before, after = current.get(name, _MISSING), proposed.get(name, _MISSING)
        lines: tuple[str, ...] = ()
        if before != after and (isinstance(before, dict | list) or isinstance(after, dict | list)):
            lines = tuple(difflib.unified_diff(_pretty(before), _pretty(after), "now", "proposed", lineterm="", n=2))
        changes.append(FieldChange(name, before, after, lines, tuple(suspicious_in(after))))
    return changes


def _pretty(value: Any) -> list[str]:
    if value is None:
        return []
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
