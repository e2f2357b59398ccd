"""Which characters change what a reviewer sees (SPEC FOUR-10): one pure classification."""

from __future__ import annotations

import pytest

from app.domain.text_safety import describe, suspicious_characters


@pytest.mark.parametrize(
    ("text", "position", "category", "codepoint"),
    [
        ("post:1001\u200b", 9, "invisible", "U+200B"),  # zero width space
        ("post:10\u00ad01", 7, "invisible", "U+00AD"),  # soft hyphen
        ("post:\u206010", 5, "invisible", "U+2060"),  # word joiner (Cf)
        ("\ufeffpost:1", 0, "invisible", "U+FEFF"),
        ("post:1\x07", 6, "invisible", "U+0007"),  # a control character
        ("user:\u202e1234", 5, "bidi", "U+202E"),  # right-to-left override
        ("user:\u20661", 5, "bidi", "U+2066"),
        ("user:1\u200f", 6, "bidi", "U+200F"),
        ("user:1\u061c", 6, "bidi", "U+061C"),
        ("p\u043est:1", 1, "lookalike", "U+043E"),  # Cyrillic o
        ("post:\uff11", 5, "lookalike", "U+FF11"),  # fullwidth 1
        ("post:\u0391", 5, "lookalike", "U+0391"),  # Greek capital alpha
    ],
)
def test_four10_each_character_that_changes_what_is_shown_is_named(text, position, category, codepoint):
    """FOUR-10: invisible (Cf, zero-width, soft hyphen, controls), bidirectional controls
    and non-ASCII lookalikes of ASCII are found with their position and category."""
    found = suspicious_characters(text)
    assert [(f.position, f.category, f.codepoint) for f in found] == [(position, category, codepoint)]
    assert f"position {position}" in describe(found[0]) and codepoint in describe(found[0])


@pytest.mark.parametrize("text", ["post:1001", "at://did:plc:abc/app.bsky.feed.post/3k", "tag:日本語", "user:émile", ""])
def test_four10_plain_text_has_nothing_suspicious(text):
    """FOUR-10: ASCII and non-ASCII text that looks like itself (no lookalike of ASCII) passes."""
    assert not suspicious_characters(text)


def test_four10_every_occurrence_is_listed_in_order():
    """FOUR-10: all of them, in order of position."""
    found = suspicious_characters("\u202ep\u043e\u200b")
    assert [(f.position, f.category) for f in found] == [(0, "bidi"), (2, "lookalike"), (3, "invisible")]


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://Platform.example/p/1", "platform.example"),
        ("https://platform.example:8443/p?x=@", "platform.example"),
        ("http://[2001:db8::1]:80/x", "[2001:db8::1]"),
        ("https://ex\u0430mple.social/p/1", "xn--exmple-4nf.social"),  # a Cyrillic a: shown as the DNS name
    ],
)
def test_four10_a_link_shows_the_host_it_really_opens(url, host):
    """FOUR-10: the host shown beside an external link is the one it opens; a host with
    non-ASCII characters is shown in its DNS (punycode) form, so a lookalike cannot pass."""
    from app.domain.evidence import link_host

    assert link_host(url) == host


@pytest.mark.parametrize("char", ["\u17b4", "\u17b5", "\u3164", "\u2800"])
def test_four10_blank_drawing_letters_are_invisible(char):
    """FOUR-10 (break-it pass): Khmer inherent vowels, Hangul filler and Braille blank draw nothing."""
    assert [found.category for found in suspicious_characters(f"post:1{char}")] == ["invisible"]


@pytest.mark.parametrize(
    "char", ["\u2065", "\ufff0", "\ufff8", "\U000e0080", "\U000e01f0", "\u180b", "\U0001d173", "\U0001bca0"]
)
def test_four10_every_default_ignorable_code_point_is_invisible(char):
    """FOUR-10 (second break-it pass): Unicode's default-ignorable code points draw nothing,
    assigned or not (U+2065, U+FFF0..FFF8, the unassigned tags, musical format marks)."""
    assert [found.category for found in suspicious_characters(f"post:77{char}")] == ["invisible"]


@pytest.mark.parametrize(
    "text",
    ["post:\u07c077", "post:7\u0be67", "post:1\u09660", "user:\u01c0ee", "user:\u1d00dmin", "user:\u0269x",
     "example\u3002com", "example\uff61com"],
)
def test_four10_digits_of_other_scripts_and_latin_lookalikes_are_lookalikes(text):
    """FOUR-10 (second break-it pass): NKo, Tamil, Bengali digits, the Latin click ǀ, small
    capitals, Latin iota, ideographic full stops."""
    assert "lookalike" in [found.category for found in suspicious_characters(text)]


@pytest.mark.parametrize("text", ["post:1001", "POST:X1001", "tag:日本語", "user:émile", "", None])
def test_four10_a_plain_reference_or_none_passes(text):
    """FOUR-10: a reference shown as it is (or not sent at all) is accepted."""
    from app.domain.text_safety import check_reference

    assert check_reference(text, "targets[0].reference") is None


@pytest.mark.parametrize(
    "text, named",
    [
        ("post:1001\u200b", "U+200B ZERO WIDTH SPACE (invisible) at position 9"),
        ("ev-1\n", "U+000A U+000A (invisible) at position 4"),
        ("\tev-1", "U+0009 U+0009 (invisible) at position 0"),
        ("ev\r1", "U+000D U+000D (invisible) at position 2"),
        ("p\u043est:1", "U+043E CYRILLIC SMALL LETTER O (lookalike) at position 1"),
    ],
)
def test_four10_a_reference_with_a_character_that_looks_like_another_is_refused(text, named):
    """FOUR-10: 400 reference_characters on the field, naming the first such character and
    its position; a reference is one line, so a tab or line break counts too."""
    from app.domain.errors import ApiError
    from app.domain.text_safety import check_reference

    with pytest.raises(ApiError) as caught:
        check_reference(text, "targets[0].reference")
    error = caught.value
    assert (error.status, error.code, error.field) == (400, "reference_characters", "targets[0].reference")
    assert error.message == (
        f"targets[0].reference contains {named}: it would look like another reference. "
        "Send the reference with plain characters only."
    )


def test_four10_a_reference_names_the_first_finding_and_counts_the_others():
    """FOUR-10: findings are in position order, line breaks among them; the message names
    the first and says how many more."""
    from app.domain.text_safety import reference_characters, reference_problem

    text = "a\u200bb\nc\u202ed"
    assert [(f.position, f.category) for f in reference_characters(text)] == [
        (1, "invisible"), (3, "invisible"), (5, "bidi"),
    ]
    assert reference_problem(text, "external_id").startswith(
        "external_id contains U+200B ZERO WIDTH SPACE (invisible) at position 1 (and 2 more): "
    )
    assert "more" not in reference_problem("a\u200b", "external_id")
    assert "(and 1 more)" in reference_problem("a\u200b\u200b", "external_id")
    assert reference_problem("plain", "external_id") is None


@pytest.mark.parametrize("char", ["\u0085", "\u009b", "\u0600", "\ufff9", "\U000110bd"])
def test_four10_format_and_control_characters_outside_the_ignorable_ranges_are_invisible(char):
    """FOUR-10: every format (Cf) and control (Cc) character is drawn as nothing or moves
    what follows: a C1 control, the Arabic number sign, an interlinear annotation anchor."""
    [found] = suspicious_characters("post:1" + char)
    assert (found.position, found.category) == (6, "invisible")


@pytest.mark.parametrize("char", ["\u0131", "\u0436", "\u0251"])
def test_four10_a_listed_lookalike_or_a_letter_of_a_latin_like_script_among_ascii_is_a_lookalike(char):
    """FOUR-10: a dotless ı (listed), a Cyrillic ж (mixed scripts) or a Latin ɑ among ASCII
    letters passes for ASCII."""
    [found] = suspicious_characters("adm" + char + "n")
    assert (found.position, found.category) == (3, "lookalike")
