"""Characters that change what a reviewer sees (SPEC FOUR-10).

``post:1001\\u200b`` looks like ``post:1001`` on every screen but names another post,
with none of its history; a right-to-left override turns ``user:1234`` around; a
Cyrillic ``о`` in ``pоst:1`` passes for Latin. `suspicious_characters` finds such
characters in one pass, with their position and one of three categories:

* ``invisible``: format characters (Unicode category Cf: zero-width space and joiners,
  word joiner, byte-order mark, soft hyphen...), control characters (Cc), and the few
  other code points drawn as nothing (combining grapheme joiner, Hangul fillers,
  variation selectors);
* ``bidi``: bidirectional controls -- embeddings and overrides U+202A..U+202E,
  isolates U+2066..U+2069, the marks U+200E/U+200F and the Arabic letter mark U+061C;
* ``lookalike``: a non-ASCII character drawn like an ASCII one: whatever NFKC folds to
  ASCII (fullwidth and mathematical letters and digits, no-break space...), the
  Cyrillic, Greek and Armenian letters, dashes and slashes of `LOOKALIKES`, and any
  letter of a Latin-like script (`LOOKALIKE_SCRIPTS`) in text that also has ASCII
  letters (mixed scripts: ``аdmin2@example.com``).

Other non-ASCII text (``tag:日本語``, ``user:émile``) is not suspicious. Pure: no
Flask, no database. References refuse any finding (400 ``reference_characters``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

BIDI_CONTROLS = frozenset(
    {chr(c) for c in range(0x202A, 0x202F)} | {chr(c) for c in range(0x2066, 0x206A)} | {"\u200e", "\u200f", "\u061c"}
)
# Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties): drawn as nothing,
# assigned or not (an unassigned one in them is still skipped by every renderer).
DEFAULT_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
# Drawn as nothing, though not default-ignorable.
OTHER_INVISIBLES = frozenset({"\u2800"})
# Non-ASCII letters and signs drawn like ASCII that NFKC leaves alone.
LOOKALIKES = frozenset(
    # Cyrillic
    "аеорсухіјѕԁԛԝһӏ"
    "АВЕКМНОРСТХІЈЅ"
    # Greek
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοναι"
    # Armenian
    "օսհո"
    # Latin that is not ASCII but reads as it: dotless i, small capitals
    "ıɑɡ"
    # dashes, minus, slashes, dots (the ideographic full stops read as a dot in a host name)
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2044\u2215\u29f8\u0589\u05c3\u2236\u3002\uff61"
)
# Latin letters with no ASCII base that pass for ASCII ones: clicks (ǀ for l), IPA (ɩ),
# small capitals and other phonetic letters (ᴀ).
LATIN_LOOKALIKE_RANGES = ((0x01C0, 0x01C3), (0x0250, 0x02AF), (0x1D00, 0x1DBF))
# Scripts whose letters are drawn like Latin ones: one of them among ASCII letters is mixed scripts.
LOOKALIKE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "LISU", "TIFINAGH")
CATEGORIES = ("invisible", "bidi", "lookalike")


@dataclass(frozen=True)
class SuspiciousCharacter:
    """One character that changes what is shown.

    Attributes:
        position: its index in the text (0-based, in code points).
        character: the character itself.
        category: ``invisible``, ``bidi`` or ``lookalike``.
    """

    position: int
    character: str
    category: str

    @property
    def codepoint(self) -> str:
        """``U+200B``."""
        return f"U+{ord(self.character):04X}"

    @property
    def name(self) -> str:
        """The Unicode name (``ZERO WIDTH SPACE``), or the code point when it has none."""
        return unicodedata.name(self.character, self.codepoint)

    # The change page's words for the same facts.
    index = property(lambda self: self.position)
    char = property(lambda self: self.character)
    kind = property(lambda self: self.category)

    def __str__(self) -> str:
        return f"{self.codepoint} {self.name} ({self.category})"


def classify(character: str, among_ascii_letters: bool = False) -> str | None:
    """The category of one character (``invisible``, ``bidi``, ``lookalike``), or None.

    Args:
        character: a string of one code point.
        among_ascii_letters: whether its text also has ASCII letters (then a letter of
            a `LOOKALIKE_SCRIPTS` script is a lookalike: mixed scripts).
    """
    if character.isascii():
        return "invisible" if unicodedata.category(character) == "Cc" and character not in "\t\n\r" else None
    if character in BIDI_CONTROLS:
        return "bidi"
    if unicodedata.category(character) in ("Cf", "Cc") or character in OTHER_INVISIBLES or _ignorable(character):
        return "invisible"
    if unicodedata.category(character) == "Nd":
        return "lookalike"  # a digit of another script (NKo ߀, Tamil ௦) among ASCII ones
    if unicodedata.normalize("NFKC", character).isascii():
        return "lookalike"
    if not character.isalpha():
        return "lookalike" if character in LOOKALIKES else None
    if _in(character, LATIN_LOOKALIKE_RANGES):
        return "lookalike"
    # a letter: only among ASCII letters does it pass for one (text wholly in Greek is Greek)
    if among_ascii_letters and (character in LOOKALIKES or unicodedata.name(character, "").startswith(LOOKALIKE_SCRIPTS)):
        return "lookalike"
    return None


def _in(character: str, ranges: tuple[tuple[int, int], ...]) -> bool:
    code = ord(character)
    return any(low <= code <= high for low, high in ranges)


def _ignorable(character: str) -> bool:
    """Whether `character` is one of Unicode's default-ignorable code points."""
    return _in(character, DEFAULT_IGNORABLE_RANGES)


def suspicious_characters(text: Any) -> list[SuspiciousCharacter]:
    """Every character of `text` that changes what a reviewer sees (SPEC FOUR-10).

    Args:
        text: any text (a reference, a name, a value in a diff); a non-string has none.

    Returns:
        The findings in order of position; empty when the text shows as what it is.
    """
    if not isinstance(text, str):
        return []
    among_ascii_letters = any(c.isascii() and c.isalpha() for c in text)
    found = []
    for position, character in enumerate(text):
        category = classify(character, among_ascii_letters)
        if category is not None:
            found.append(SuspiciousCharacter(position, character, category))
    return found


def suspicious_in(value: Any) -> list[SuspiciousCharacter]:
    """`suspicious_characters` of every string in a JSON-like value (keys included),
    for the diff of a configuration change whose fields are objects and lists."""
    return [found for text in _strings(value) for found in suspicious_characters(text)]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def describe(finding: SuspiciousCharacter) -> str:
    """For people: ``U+200B ZERO WIDTH SPACE (invisible) at position 9``."""
    return f"{finding.codepoint} {finding.name} ({finding.category}) at position {finding.position}"


def reference_characters(text: str) -> list[SuspiciousCharacter]:
    """`suspicious_characters`, and the tab and line breaks other text may hold: a
    reference is one line, so ``ev-1\\n`` is not shown apart from ``ev-1`` (FOUR-10)."""
    breaks = [SuspiciousCharacter(i, c, "invisible") for i, c in enumerate(text) if c in "\t\n\r"]
    return sorted(suspicious_characters(text) + breaks, key=lambda finding: finding.position)


def reference_problem(text: str, field: str) -> str | None:
    """Why a reference cannot be accepted as sent, or None (SPEC FOUR-10).

    A reference (a target, an author, a subject) must be exactly what the console
    shows: one with an invisible, bidirectional or lookalike character would look
    like another reference and carry none of its history.

    Args:
        text: the reference as received.
        field: its JSON path, for the message (``targets[0].reference``).

    Returns:
        A message for people naming the first such character and its position (the
        caller answers 400 ``reference_characters``), or None when there is none.
    """
    found = reference_characters(text)
    if not found:
        return None
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (
        f"{field} contains {describe(found[0])}{more}: it would look like another reference. "
        "Send the reference with plain characters only."
    )


def check_reference(text: str | None, field: str) -> None:
    """Refuse a reference that would look like another (SPEC FOUR-10).

    Args:
        text: the reference as received (None: not sent, nothing to check).
        field: its JSON path (``targets[0].reference``, ``external_id``).

    Raises:
        ApiError: 400 ``reference_characters`` naming the character and its position.
    """
    problem = reference_problem(text, field) if isinstance(text, str) else None
    if problem:
        raise ApiError(400, "reference_characters", problem, field)
