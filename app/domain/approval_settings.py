"""An approval settings document as admins write it, and in words (SPEC POL-1, POL-3).

`approval_policy.settings_problems` checks what the settings mean (counts, times,
routes naming known policies); `document_problems` also checks the document's shape
(types, names, sizes), so a value of the wrong type is refused with the place it is
at instead of failing later where a route is matched. `settings_words` and
`change_words` say the settings, and what a change of them changes, for the admin
page and the pending change's page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from app.domain import approval_policy as pol

NAME = {"type": "string", "pattern": r"^[a-z][a-z0-9_-]{0,49}$"}  # a policy, factor, role, team or attribute key
LABEL = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[^\x00-\x1f\x7f]+$"}
VALUE = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[^\x00-\x1f\x7f]+$"}
MAX_POLICIES, MAX_ROUTES, MAX_NAMES = 20, 50, 10
MAX_PROBLEMS = 20

FACTOR_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "label"],
    "properties": {
        "key": NAME,
        "label": LABEL,
        "count": {"type": "integer"},
        "deny_count": {"type": "integer"},
        "roles": {"type": "array", "items": NAME, "maxItems": MAX_NAMES, "uniqueItems": True},
        "teams": {"type": "array", "items": NAME, "maxItems": MAX_NAMES, "uniqueItems": True},
        "attributes": {"type": "object", "propertyNames": NAME, "additionalProperties": VALUE,
                       "maxProperties": MAX_NAMES},
    },
}
POLICY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "label", "factors"],
    "properties": {
        "key": NAME,
        "label": LABEL,
        "ttl_seconds": {"type": ["integer", "null"]},
        "reason_on_reject": {"type": "boolean"},
        "factors": {"type": "array", "items": FACTOR_SCHEMA},
    },
}
ROUTE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["policies"],
    "properties": {
        "policies": {"type": "array", "items": NAME, "minItems": 1, "maxItems": MAX_NAMES, "uniqueItems": True},
        "component": {"type": ["string", "null"], "minLength": 1, "maxLength": 200},
        "action_code": {"type": ["string", "null"], "minLength": 1, "maxLength": 100},
        "protected": {"type": ["boolean", "null"]},
        "irreversible": {"type": ["boolean", "null"]},
        "min_items": {"type": ["integer", "null"], "minimum": 1},
    },
}
SETTINGS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["policies", "routes"],
    "properties": {
        "policies": {"type": "array", "items": POLICY_SCHEMA, "maxItems": MAX_POLICIES},
        "routes": {"type": "array", "items": ROUTE_SCHEMA, "maxItems": MAX_ROUTES},
        "emergency_review_seconds": {"type": "integer"},
        "notify_webhook_url": {"type": ["string", "null"], "maxLength": 2000},
    },
}
_VALIDATOR = Draft202012Validator(SETTINGS_SCHEMA)


def document_problems(data: Any, known_roles: Iterable[str], known_components: Iterable[str] | None = None,
                      known_action_codes: Iterable[str] | None = None) -> list[str]:
    """What is wrong with an approval settings document, in words (empty when valid)
    (POL-1, POL-3), every problem at once: its shape (`SETTINGS_SCHEMA`), what it means
    (`approval_policy.settings_problems`), each role a factor names being one of
    `known_roles` (a factor nobody can hold would never be met), policy keys being
    distinct, and each route's `component` / `action_code` being one of
    `known_components` / `known_action_codes` when those are given (a route naming
    nothing that exists would never match). At most 20 problems."""
    shape = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_place(error.absolute_path) + error.message[:200] for error in shape]
    if not isinstance(data, Mapping):
        return problems[:MAX_PROBLEMS]
    meaning = pol.settings_problems(data)
    policies = [p for p in _list(data.get("policies")) if isinstance(p, Mapping)]
    keys = [policy.get("key") for policy in policies]
    if not (shape and len(meaning) == 1 and meaning[0].startswith("The approval settings are malformed")):
        problems += meaning
    else:  # the shape errors say why it could not be read; still say which routes name no policy
        named = set(map(str, keys)) | {pol.DEFAULT_POLICY.key}
        for index, rule in enumerate(_list(data.get("routes")), start=1):
            wanted = [k for k in _list(rule.get("policies") if isinstance(rule, Mapping) else None) if isinstance(k, str)]
            unknown = [k for k in wanted if k not in named]
            if unknown:
                problems.append(f"Route {index} names no policy or an unknown one ({', '.join(unknown)}).")
    if len(set(map(str, keys))) != len(keys):
        problems.append("Policy keys must be distinct.")
    known = set(known_roles)
    for policy in policies:
        for factor in (f for f in _list(policy.get("factors")) if isinstance(f, Mapping)):
            roles = [r for r in _list(factor.get("roles")) if isinstance(r, str)]
            unknown = sorted(set(roles) - known)
            if unknown:
                problems.append(
                    f"Policy {policy.get('key')}, factor {factor.get('key')}: no such role {', '.join(unknown)}"
                    f" (roles: {', '.join(sorted(known))})."
                )
    for index, rule in enumerate(_list(data.get("routes")), start=1):
        if not isinstance(rule, Mapping):
            continue
        for field, names, noun in (
            ("component", known_components, "component"),
            ("action_code", known_action_codes, "action code"),
        ):
            value = rule.get(field)
            if names is None or not isinstance(value, str):
                continue
            names = sorted(set(names))
            if value not in names:
                problems.append(
                    f"Route {index}: no such {noun} {value!r} (the {noun}s: {', '.join(names) or 'none'})."[:400]
                )
    return problems[:MAX_PROBLEMS]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _plural(label: str) -> str:
    return label + ("es" if label.endswith(("s", "sh", "ch")) else "s")


def _place(path: Iterable[Any]) -> str:
    parts = list(path)
    return ("At " + "/".join(str(p) for p in parts) + ": ") if parts else ""


def normalised(data: Mapping[str, Any]) -> dict[str, Any]:
    """A valid document as it is stored and read back (`settings_to_json` of what it
    means): defaults filled in, the default policy present."""
    return pol.settings_to_json(pol.settings_from_json(data))


# -- in words ----------------------------------------------------------------------------


def duration_words(seconds: int) -> str:
    """"90 min", "4 h", "2 days", "45 s"."""
    if seconds % 86400 == 0:
        days = seconds // 86400
        return f"{days} day{'s' if days != 1 else ''}"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def eligibility_words(eligibility: pol.Eligibility) -> str:
    """Who may count for a factor: "role reviewer or admin, team trust-leads, level = lead"."""
    parts = []
    if eligibility.roles:
        parts.append(f"role {' or '.join(eligibility.roles)}")
    if eligibility.teams:
        parts.append(f"team {' or '.join(eligibility.teams)}")
    parts += [f"{key} = {value}" for key, value in eligibility.attributes]
    return ", ".join(parts) or "nobody"


def factor_words(factor: pol.Factor) -> str:
    """"1 lead (role reviewer, level = lead); 1 rejection vetoes"."""
    noun = factor.label if factor.count == 1 else _plural(factor.label)
    deny = f"{factor.deny_count} rejection{'s veto' if factor.deny_count != 1 else ' vetoes'}"
    return f"{factor.count} {noun} ({eligibility_words(factor.eligibility)}); {deny}"


@dataclass(frozen=True)
class PolicyWords:
    key: str
    label: str
    factors: tuple[str, ...]
    time_to_live: str
    rejection: str

    def line(self) -> str:
        return f"{self.label} [{self.key}]: {' AND '.join(self.factors)}; {self.time_to_live}; {self.rejection}"


def policy_words(policy: pol.Policy) -> PolicyWords:
    """A policy in words (POL-1): each factor, the approvals' time to live, whether a
    rejection needs a reason."""
    ttl = (
        f"an approval counts for {duration_words(policy.ttl_seconds)}"
        if policy.ttl_seconds is not None
        else "an approval counts until the proposal's authorization expires"
    )
    rejection = "a rejection needs a reason" if policy.reason_on_reject else "a rejection's reason is optional"
    return PolicyWords(policy.key, policy.label, tuple(factor_words(f) for f in policy.factors), ttl, rejection)


def route_words(rule: pol.Route, policies: Mapping[str, pol.Policy]) -> str:
    """"When an irreversible action: Two reviewers [two_reviewers]" (POL-3)."""
    names = " or ".join(
        f"{policies[key].label} [{key}]" if key in policies else f"[{key}]" for key in rule.policies
    )
    return f"When {rule.in_words()}: {names}"


@dataclass(frozen=True)
class SettingsWords:
    policies: tuple[PolicyWords, ...]
    routes: tuple[str, ...]  # in order; the first that matches applies
    otherwise: str
    emergency_review: str
    notify_webhook: str


def settings_words(settings: pol.ApprovalSettings) -> SettingsWords:
    """The settings in words for the admin page (POL-1, POL-3, POL-6, POL-7)."""
    default = settings.policies.get(pol.DEFAULT_POLICY.key, pol.DEFAULT_POLICY)
    return SettingsWords(
        tuple(policy_words(p) for p in settings.policies.values()),
        tuple(route_words(r, settings.policies) for r in settings.routes),
        f"Otherwise: {default.label} [{default.key}]",
        f"An emergency action's retrospective review is due within {duration_words(settings.emergency_review_seconds)}.",
        settings.notify_webhook_url or "none",
    )


def change_words(data: Mapping[str, Any]) -> dict[str, Any]:
    """A settings document as the pending change's page compares it, in words: one
    line per policy, the routes in order, the emergency review time and the webhook."""
    words = settings_words(pol.settings_from_json(data))
    return {
        "policies": [p.line() for p in words.policies],
        "routes": [*words.routes, words.otherwise],
        "emergency_review": words.emergency_review,
        "notify_webhook_url": words.notify_webhook,
    }


# -- an operator's team and attributes (what eligibility reads, POL-1) ---------------------

MAX_ATTRIBUTES = 10
_TEAM = NAME["pattern"]


def team_problem(team: str | None) -> str | None:
    """Why `team` cannot be an operator's team (None: it can; None or "" is no team):
    one word of lowercase letters, digits, ``-`` and ``_``, at most 50 characters."""
    if not team:
        return None
    if not re.fullmatch(_TEAM, team):
        return "A team is one word: lowercase letters, digits, - and _ (at most 50 characters, starting with a letter)."
    return None


def parse_attributes(text: str) -> tuple[dict[str, str] | None, str | None]:
    """Attributes typed as ``key=value`` pairs, one per line or separated by commas.

    Returns:
        (the attributes, None), or (None, why they cannot be read): a key is a name
        like a team's; a value is 1..100 characters without control characters,
        commas or ``=``; at most 10 pairs, each key once.
    """
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in re.split(r"[,\n]", text or "")):
        if not item:
            continue
        key, sep, value = (piece.strip() for piece in item.partition("="))
        if not sep or not re.fullmatch(_TEAM, key):
            return None, f"{item[:60]!r} is not key=value (a key is a lowercase word)."
        if not 1 <= len(value) <= 100 or "=" in value or re.search(r"[\x00-\x1f\x7f]", value):
            return None, f"The value of {key} must be 1 to 100 characters, without '=' or commas."
        if key in pairs:
            return None, f"{key} is given twice."
        pairs[key] = value
    if len(pairs) > MAX_ATTRIBUTES:
        return None, f"At most {MAX_ATTRIBUTES} attributes."
    return pairs, None


def attributes_text(attributes: Mapping[str, str] | None) -> str:
    """Attributes as the form shows them: ``key=value`` per line, sorted."""
    return "\n".join(f"{key}={value}" for key, value in sorted((attributes or {}).items()))
