"""Which accounts need a second factor, and the window its codes match (SPEC OPS-2)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from app.domain.second_factor import candidate_steps, code_kind, needs_second_factor


def account(roles, enrolled=False):
    confirmed = datetime(2026, 1, 1, tzinfo=UTC) if enrolled else None
    return SimpleNamespace(roles=frozenset(roles), totp_confirmed_at=confirmed)


@pytest.mark.parametrize(
    ("roles", "enrolled", "needed"),
    [
        (["reviewer"], False, True),
        (["admin"], False, True),
        (["admin", "reviewer"], True, True),
        (["moderator", "reviewer"], False, True),
        (["moderator"], False, False),
        (["auditor"], False, False),
        (["moderator"], True, True),  # enrolled voluntarily: required from then on
        (["auditor"], True, True),
    ],
)
def test_ops2_reviewers_admins_and_the_voluntarily_enrolled_need_a_second_factor(roles, enrolled, needed):
    assert needs_second_factor(account(roles, enrolled)) is needed


def test_ops2_sso_sign_ins_are_exempt_the_identity_provider_does_the_second_factor():
    assert needs_second_factor(account(["admin"], True), via_sso=True) is False


def test_ops2_a_code_matches_one_step_either_side_and_never_a_step_used_before():
    assert candidate_steps(100, None) == [99, 100, 101]
    assert candidate_steps(100, 99) == [100, 101]
    assert candidate_steps(100, 101) == []


def test_ops2_codes_are_read_without_spaces_or_dashes():
    assert code_kind(" 123 456 ") == ("totp", "123456")
    assert code_kind("abcde-fghjk") == ("recovery", "ABCDEFGHJK")
    assert code_kind("12345") == ("none", "")
    assert code_kind(None) == ("none", "")
    assert code_kind("ABCDE-FGHJ0") == ("none", "")  # 0 is not in the alphabet
