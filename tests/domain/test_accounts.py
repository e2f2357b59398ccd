"""Accounts by invitation (FOUR-6), lookalike e-mails and reasons of substance (FOUR-10)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.accounts import (
    check_public_url,
    email_lookalike_problem,
    invitation_problem,
    invitation_token_hash,
)
from app.domain.reasons import reason_problem

from .messages import assert_sentences

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    "reason, ok",
    [
        ("Incident 4711: the second admin is on leave", True),
        ("INC-4711 second-admin away", True),
        ("\u200b" * 10, False),  # issue 22: ten zero-width spaces
        ("\u200b" * 40 + " x", False),
        ("short one", False),  # two words, 8 visible characters
        ("averylongsinglewordwithoutspaces", False),  # one word
        ("a\u200bb\u200bc\u200bd\u200be\u200bf\u200b g\u200bh\u200bi\u200bj\u200bk\u200bl", True),
        ("\u202eoverride\u202c incident\u2066 4711", True),  # bidi controls do not count, the words do
        ("\u202e\u202c \u2066\u2069 \ufeff\u00ad ok", False),
        ("incident 4711\x00 on leave", False),
        ("\u3164" * 12 + " \u3164", False),  # break-it: Hangul fillers draw nothing
        ("\u2800" * 12 + " \u2800\u2800", False),  # Braille blanks
        ("\u115f\u1160" * 6 + " \u034f\u034f", False),  # Hangul choseong/jungseong fillers, CGJ
        ("a\u0301\u0301\u0301\u0301\u0301\u0301 b\u0301\u0301\u0301\u0301\u0301\u0301", False),  # marks alone
        ("\u17b4" * 12 + " \u17b5\u17b5", False),  # Khmer invisible vowels
        ("\u2065" * 12 + " \u2065", False),  # second break-it pass: an unassigned default ignorable
        ("\U000e0080" * 12 + " \ufff0\ufff0", False),  # unassigned tags and specials
        ("\ue000" * 12 + " \ue001\ue001", False),  # private use draws nothing agreed
        ("\ufffc" * 12 + " \ufffc\ufffc", False),  # object replacement character
        ("x " * 1001, False),
        (None, False),
        (12345678901234, False),
        ("   ", False),
    ],
)
def test_four10_a_reason_of_substance_has_visible_words(reason, ok):
    """FOUR-10: invisible characters and whitespace do not count; 12 visible characters in 2+ words."""
    problem = reason_problem(reason)
    assert (problem is None) is ok, problem
    assert problem is None or problem.endswith(".")


@pytest.mark.parametrize(
    "email, ok",
    [
        ("admin2@example.com", True),
        ("\u0430dmin2@example.com", False),  # issue 22: a Cyrillic а
        ("admin2@ex\u0430mple.com", False),
        ("ad\u200bmin2@example.com", False),  # zero-width space
        ("admin2@example.com\u202e", False),  # bidi override
        ("adm\u00efn@example.com", False),
    ],
)
def test_four10_operator_emails_must_be_plain_ascii(email, ok):
    """FOUR-10: an e-mail that could pass for another is refused, not flagged."""
    problem = email_lookalike_problem(email)
    assert (problem is None) is ok
    if problem:
        assert "invisible characters can make one address look like another" in problem
        assert_sentences(problem)


def test_four6_an_invitation_is_usable_once_and_until_it_expires():
    """FOUR-6: used, replaced or expired invitations answer 410 with their own code."""
    later = NOW + timedelta(hours=72)
    assert invitation_problem(expires_at=later, used_at=None, revoked_at=None, now=NOW) is None
    assert invitation_problem(expires_at=later, used_at=NOW, revoked_at=None, now=NOW)[:2] == (410, "invitation_used")
    assert invitation_problem(expires_at=later, used_at=None, revoked_at=NOW, now=NOW)[:2] == (
        410,
        "invitation_replaced",
    )
    assert invitation_problem(expires_at=NOW, used_at=None, revoked_at=None, now=NOW)[:2] == (410, "invitation_expired")
    for used_at, revoked_at, expires_at in [(NOW, None, later), (None, NOW, later), (None, None, NOW)]:
        _, _, message = invitation_problem(expires_at=expires_at, used_at=used_at, revoked_at=revoked_at, now=NOW)
        assert_sentences(message)  # says what happened, then what to do
    assert invitation_token_hash("abc") != invitation_token_hash("abd")
    assert invitation_token_hash("abc").startswith("sha256:") and "abc" not in invitation_token_hash("abc")[7:]


@pytest.mark.parametrize(
    "value, base",
    [
        ("https://console.example.org", "https://console.example.org"),
        ("https://console.example.org/", "https://console.example.org"),
        ("HTTPS://Console.Example.org:8443/tns/", "HTTPS://Console.Example.org:8443/tns"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000"),
        ("http://[::1]:8000/", "http://[::1]:8000"),
        ("https://console.example.org/BOX/", "https://console.example.org/BOX"),
        ("https://c.example/" + "p" * 482, "https://c.example/" + "p" * 482),  # 500 characters
    ],
)
def test_four6_public_url_is_an_absolute_http_address(value, base):
    """FOUR-6: PUBLIC_URL, the only base of a mailed invitation link, is kept without its final slash."""
    assert check_public_url(value) == base


@pytest.mark.parametrize(
    "value",
    [
        "",
        "console.example.org",  # no scheme
        "/console",  # relative
        "//console.example.org",
        "ftp://console.example.org",
        "javascript:alert(1)",
        "https://",
        "https:///path",
        "https://user:secret@console.example.org",  # userinfo: the link would point elsewhere
        "https://console.example.org@evil.example",
        "https://console.example.org/?next=x",
        "https://console.example.org/?",
        "https://console.example.org/#top",
        "https://console.example.org:99999",
        "https://console.example.org:port",
        "https://console example.org",
        "https://console.example.org/\nBcc: x",
        "https://console.example.org/\u202e",
        "https://console.example.org/a b",
        "https://console.example.org/\\evil.example",
        "h" * 3000,
        "https://c.example/" + "p" * 483,  # 501 characters
        None,
        42,
    ],
)
def test_four6_public_url_refuses_what_is_not_one_plain_address(value):
    """FOUR-6: no scheme other than http(s), no host, userinfo, query, fragment, bad port,
    whitespace or control characters: refused with a ValueError naming PUBLIC_URL."""
    with pytest.raises(ValueError) as caught:
        check_public_url(value)
    assert str(caught.value).startswith("PUBLIC_URL must be")
    assert "e.g. https://console.example.org" in str(caught.value)  # the form it wants


@pytest.mark.parametrize("password", ["a" * 12, "a" * 500, "correct horse battery"])
def test_four6_a_password_of_12_to_500_characters_is_accepted(password):
    """FOUR-6: an invitee's own password of 12 to 500 characters is kept as given."""
    from app.domain.accounts import check_new_password

    assert check_new_password(password) == password


@pytest.mark.parametrize("password", ["a" * 11, "a" * 501, "", None, 123456789012, ["a" * 12]])
def test_four6_a_password_too_short_too_long_or_not_text_is_refused(password):
    """FOUR-6: 400 password_invalid on the password field, saying the rule."""
    from app.domain.accounts import check_new_password
    from app.domain.errors import ApiError

    with pytest.raises(ApiError) as caught:
        check_new_password(password)
    error = caught.value
    assert (error.status, error.code, error.field) == (400, "password_invalid", "password")
    assert "12 to 500 characters" in error.message
    assert_sentences(error.message)
