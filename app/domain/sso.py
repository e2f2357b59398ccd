"""Single sign-on rules (SPEC OPS-1): the installation's mapping from identity-provider
groups to console roles, read from text an admin typed, and the roles an operator holds
after signing in with a given set of groups.

Pure: no database, no HTTP. The mapping itself is a four-eyes change
(`app.domain.config_changes.ChangeKind.SSO_MAPPING`); signing in applies it
(`app.services.sso_sign_in`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from app.domain.errors import ApiError

ROLES = ("moderator", "reviewer", "admin", "auditor", "emergency")  # the same as app.models.tenancy.ROLES
MAX_PAIRS = 200
MAX_GROUP_LENGTH = 200
MAX_GROUPS_IN_CLAIM = 1000
SIGN_IN_METHODS = ("password", "sso")


def _clean_group(value: Any) -> str | None:
    """A group name as the IdP sends it: 1..200 characters, no control characters; else None."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not 1 <= len(value) <= MAX_GROUP_LENGTH or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return None
    return value


def check_mapping(pairs: Any) -> list[dict[str, str]]:
    """A group→role mapping, checked and put in one order (OPS-1).

    Args:
        pairs: a list of ``{"group": str, "role": str}``; a group may give several
            roles (one pair each). Duplicates are dropped. An empty list is allowed: no
            group gives a role (nobody can sign in through the IdP).

    Returns:
        The pairs sorted by (group, role), without duplicates.

    Raises:
        ApiError: 400 ``sso_mapping_invalid`` (not a list of pairs, more than 200
            pairs, a group of 0 or more than 200 characters or with control
            characters), 400 ``sso_mapping_role_invalid`` (a role not among `ROLES`).
    """
    if not isinstance(pairs, list) or len(pairs) > MAX_PAIRS:
        raise ApiError(400, "sso_mapping_invalid", f"The mapping is a list of at most {MAX_PAIRS} group = role lines.",
                       "mapping")
    cleaned = set()
    for pair in pairs:
        if not isinstance(pair, Mapping):
            raise ApiError(400, "sso_mapping_invalid", "Each line of the mapping is one group = role pair.", "mapping")
        group = _clean_group(pair.get("group"))
        if group is None:
            raise ApiError(400, "sso_mapping_invalid",
                           f"A group name is 1 to {MAX_GROUP_LENGTH} characters, without control characters.",
                           "mapping")
        role = pair.get("role").strip() if isinstance(pair.get("role"), str) else ""
        if role not in ROLES:
            raise ApiError(400, "sso_mapping_role_invalid",
                           f"The role of group {group!r} must be one of: {', '.join(ROLES)}.", "mapping")
        cleaned.add((group, role))
    return [{"group": group, "role": role} for group, role in sorted(cleaned)]


def parse_mapping_text(text: Any) -> list[dict[str, str]]:
    """The mapping from the admin page's text: one ``group = role`` per line (OPS-1).

    The role is after the last ``=`` (roles never hold one), so a group name may
    contain ``=``. Blank lines and lines starting with ``#`` are skipped.

    Raises:
        ApiError: 400 ``sso_mapping_invalid`` for a line without ``=``, and whatever
            `check_mapping` raises.
    """
    pairs = []
    for number, line in enumerate((text if isinstance(text, str) else "").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        group, sep, role = line.rpartition("=")
        if not sep:
            raise ApiError(400, "sso_mapping_invalid", f"Line {number} is not of the form: group = role.", "mapping")
        pairs.append({"group": group.strip(), "role": role.strip()})
    return check_mapping(pairs)


def mapping_text(pairs: Iterable[Mapping[str, str]]) -> str:
    """The mapping as the admin page's text (the inverse of `parse_mapping_text`)."""
    return "\n".join(f"{pair['group']} = {pair['role']}" for pair in pairs)


def groups_from_claims(claims: Mapping[str, Any], claim: str) -> frozenset[str]:
    """The groups an ID token (or userinfo answer) names (OPS-1).

    Args:
        claims: the verified claims.
        claim: the claim's name (``OIDC_GROUPS_CLAIM``, default ``groups``).

    Returns:
        The group names (a lone string counts as one group); entries that are not
        group names are ignored.

    Raises:
        ApiError: 403 ``sso_groups_missing`` when the claim is absent or neither a
            list nor a string: without it the console cannot tell the roles, and it
            never guesses them.
    """
    value = claims.get(claim)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ApiError(
            403,
            "sso_groups_missing",
            f"The identity provider sent no {claim!r} claim, so the console cannot tell your roles. "
            "Ask your identity provider's administrator to release it to the console.",
        )
    return frozenset(group for group in map(_clean_group, value[:MAX_GROUPS_IN_CLAIM]) if group)


def roles_for_groups(pairs: Iterable[Mapping[str, str]], groups: Iterable[str]) -> frozenset[str]:
    """The roles the mapping gives to an operator in `groups` (OPS-1): exactly these,
    so a group removed at the IdP takes its role away at the next sign-in."""
    groups = frozenset(groups)
    return frozenset(pair["role"] for pair in pairs if pair["group"] in groups)
