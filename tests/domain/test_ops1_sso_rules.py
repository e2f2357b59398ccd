"""The single sign-on rules without a database (SPEC OPS-1): the admin's mapping text,
the groups claim, and the roles a set of groups gives."""

from __future__ import annotations

import pytest

from app.domain.config_changes import ChangeKind, second_admin_reasons
from app.domain.errors import ApiError
from app.domain.sso import check_mapping, groups_from_claims, mapping_text, parse_mapping_text, roles_for_groups


def test_ops1_the_mapping_text_is_read_line_by_line():
    """OPS-1: ``group = role`` per line, the role after the last ``=``; blank and ``#``
    lines skipped; duplicates dropped; sorted; and written back the same."""
    pairs = parse_mapping_text("# leads\nleads = reviewer\n\n a=b = moderator \nleads = reviewer\nleads = moderator")
    assert pairs == [{"group": "a=b", "role": "moderator"}, {"group": "leads", "role": "moderator"},
                     {"group": "leads", "role": "reviewer"}]
    assert parse_mapping_text(mapping_text(pairs)) == pairs
    assert parse_mapping_text("") == []


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("leads reviewer", "sso_mapping_invalid"),
        ("leads = overlord", "sso_mapping_role_invalid"),
        (" = admin", "sso_mapping_invalid"),
        ("lea\x07ds = admin", "sso_mapping_invalid"),
        ("g" * 201 + " = admin", "sso_mapping_invalid"),
        ("\n".join(f"g{n} = admin" for n in range(201)), "sso_mapping_invalid"),
    ],
)
def test_ops1_a_bad_mapping_is_refused_with_its_code(text, code):
    """OPS-1: every malformed mapping is a 400 with a code."""
    with pytest.raises(ApiError) as refused:
        parse_mapping_text(text)
    assert (refused.value.status, refused.value.code) == (400, code)


def test_ops1_roles_are_exactly_those_the_groups_give():
    """OPS-1: a group not in the mapping gives nothing; a removed group takes its role."""
    pairs = check_mapping([{"group": "mods", "role": "moderator"}, {"group": "leads", "role": "reviewer"}])
    assert roles_for_groups(pairs, {"mods", "leads", "sales"}) == {"moderator", "reviewer"}
    assert roles_for_groups(pairs, {"mods"}) == {"moderator"}
    assert roles_for_groups(pairs, set()) == frozenset()


def test_ops1_the_groups_claim_is_required():
    """OPS-1: a missing or unreadable claim is refused (403 ``sso_groups_missing``); a
    lone string is one group; entries that are not names are ignored."""
    assert groups_from_claims({"groups": ["a", " b ", 7, ""]}, "groups") == {"a", "b"}
    assert groups_from_claims({"roles": "admins"}, "roles") == {"admins"}
    for claims in ({}, {"groups": None}, {"groups": {"a": 1}}):
        with pytest.raises(ApiError) as refused:
            groups_from_claims(claims, "groups")
        assert (refused.value.status, refused.value.code) == (403, "sso_groups_missing")


def test_ops1_every_mapping_change_needs_a_second_admin():
    """OPS-1, FOUR-2: even emptying the mapping waits for a second admin."""
    assert second_admin_reasons(ChangeKind.SSO_MAPPING, {"mapping": []}, {"mapping": [{"group": "g", "role": "admin"}]})
