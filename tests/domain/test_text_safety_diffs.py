"""Lookalike, invisible and bidirectional characters (SPEC FOUR-10): one pure predicate,
flagged in change diffs and reusable to refuse platform references."""

import pytest

from app.domain.text_safety import suspicious_characters, suspicious_in


@pytest.mark.parametrize(
    "text, found",
    [
        ("\u0430dmin2@example.com", [(0, "U+0430", "lookalike", "CYRILLIC SMALL LETTER A")]),
        ("paypal.c\u03bfm", [(8, "U+03BF", "lookalike", "GREEK SMALL LETTER OMICRON")]),
        ("\uff21dmin", [(0, "U+FF21", "lookalike", "FULLWIDTH LATIN CAPITAL LETTER A")]),
        ("ad\u200bmin", [(2, "U+200B", "invisible", "ZERO WIDTH SPACE")]),
        ("sus\u00adpend", [(3, "U+00AD", "invisible", "SOFT HYPHEN")]),
        (
            "a\u2060b\ufeff",
            [(1, "U+2060", "invisible", "WORD JOINER"), (3, "U+FEFF", "invisible", "ZERO WIDTH NO-BREAK SPACE")],
        ),
        ("gpj.\u202eexe", [(4, "U+202E", "bidi", "RIGHT-TO-LEFT OVERRIDE")]),
        (
            "x\u2066y\u2069",
            [(1, "U+2066", "bidi", "LEFT-TO-RIGHT ISOLATE"), (3, "U+2069", "bidi", "POP DIRECTIONAL ISOLATE")],
        ),
        ("\u200fok\u200e", [(0, "U+200F", "bidi", "RIGHT-TO-LEFT MARK"), (3, "U+200E", "bidi", "LEFT-TO-RIGHT MARK")]),
        ("bell\x07", [(4, "U+0007", "invisible", "U+0007")]),
    ],
)
def test_four10_deceiving_characters_are_found_with_their_kind(text, found):
    """FOUR-10: each lookalike, invisible and bidirectional character, where it is and what it is."""
    assert [(c.index, c.codepoint, c.kind, c.name) for c in suspicious_characters(text)] == found


@pytest.mark.parametrize(
    "text",
    ["admin2@example.com", "café crème, naïve", "Привет мир", "Ελληνικά", "日本語のテキスト", "a\nb\tc\r", "👍", "", 42, None],
)
def test_four10_plain_text_in_any_one_script_is_not_flagged(text):
    """FOUR-10: accents, whole text in another script, emoji and line breaks are plain."""
    assert suspicious_characters(text) == []


def test_four10_json_values_are_searched_keys_included():
    value = {"allowed_hosts": ["api.example.com", "\u0430pi.example.com"], "k\u200by": 1, "n": [None, 3]}
    assert [str(c) for c in suspicious_in(value)] == [
        "U+0430 CYRILLIC SMALL LETTER A (lookalike)",
        "U+200B ZERO WIDTH SPACE (invisible)",
    ]
