"""Characters that make text read as something it is not (SPEC FOUR-10): lookalikes of
ASCII letters from other scripts (Cyrillic ``а`` in ``аdmin2@example.com``), invisible
characters (zero-width, soft hyphen, other format characters) and bidirectional
controls that reorder what is shown.

One pure predicate for every place that shows or accepts such text: the change page
flags them in a diff; a platform reference can refuse them
(``if suspicious_characters(reference): raise ...``). No Flask, no database.

    >>> [c.kind for c in suspicious_characters("\\u0430dmin2@example.com")]
    ['lookalike']
    >>> suspicious_characters("plain text, accents too: café")
    []
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

BIDI = "bidi"
INVISIBLE = "invisible"
LOOKALIKE = "lookalike"

# Bidirectional controls: embeddings and overrides, isolates, marks.
BIDI_CONTROLS = frozenset(
    [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)] + ["\u200e", "\u200f", "\u061c"]
)
# Characters that show nothing (beyond the format category Cf, which is flagged as a whole).
INVISIBLES = frozenset(["\u034f", "\u115f", "\u1160", "\u3164", "\uffa0", "\u2800", "\u180e"])
# Scripts whose letters are drawn like Latin ones.
LOOKALIKE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "LISU", "TIFINAGH")


@dataclass(frozen=True)
class SuspiciousCharacter:
    """One character that may deceive a reader.

    Attributes:
        index: its position in the text (code points).
        char: the character.
        kind: ``bidi`` (reorders text), ``invisible`` (shows nothing) or
            ``lookalike`` (drawn like an ASCII character it is not).
        name: its Unicode name, e.g. ``CYRILLIC SMALL LETTER A``.
    """

    index: int
    char: str
    kind: str
    name: str

    @property
    def codepoint(self) -> str:
        """``U+0430`` for Cyrillic ``а``."""
        return f"U+{ord(self.char):04X}"

    def __str__(self) -> str:
        return f"{self.codepoint} {self.name} ({self.kind})"


def _name(char: str) -> str:
    return unicodedata.name(char, f"U+{ord(char):04X}")


def _kind(char: str, text_has_ascii_letters: bool) -> str | None:
    if char.isascii():
        return INVISIBLE if unicodedata.category(char) == "Cc" else None
    if char in BIDI_CONTROLS:
        return BIDI
    if char in INVISIBLES or unicodedata.category(char) in ("Cf", "Cc", "Zl", "Zp"):
        return INVISIBLE
    folded = unicodedata.normalize("NFKC", char)
    if folded != char and folded.isascii() and folded.strip():
        return LOOKALIKE  # fullwidth, mathematical and other compatibility forms of ASCII
    if char.isalpha() and text_has_ascii_letters and _name(char).startswith(LOOKALIKE_SCRIPTS):
        return LOOKALIKE  # mixed scripts: a Cyrillic or Greek letter among Latin ones
    return None


def suspicious_characters(text: str) -> list[SuspiciousCharacter]:
    """The characters of `text` that may deceive a reader (FOUR-10).

    Args:
        text: any text (a value of a configuration change, a platform reference).

    Returns:
        Each bidirectional control, invisible character (format and control
        characters, zero-width ones, the soft hyphen, fillers) and lookalike
        (a compatibility form of an ASCII character, or a Cyrillic, Greek or other
        Latin-like letter in text that also has ASCII letters), in order; empty when
        the text is plain. Letters with accents and text wholly in another script are
        not flagged. Tab, line feed and carriage return are not flagged.
    """
    if not isinstance(text, str):
        return []
    has_ascii_letters = any(c.isascii() and c.isalpha() for c in text)
    found = []
    for index, char in enumerate(text):
        if char in "\t\n\r":
            continue
        kind = _kind(char, has_ascii_letters)
        if kind is not None:
            found.append(SuspiciousCharacter(index, char, kind, _name(char)))
    return found


def suspicious_in(value: Any) -> list[SuspiciousCharacter]:
    """`suspicious_characters` of every string in a JSON-like value (keys included),
    for the diff of a change whose fields are objects and lists."""
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
