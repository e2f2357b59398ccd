"""Reasons of substance for what the command line does without a second person (FOUR-10).

A reason typed for ``config-break-glass`` or for ``create-admin`` (when the
installation has an admin already) is read by whoever audits the installation later:
it must say something. What draws nothing does not count: the invisible and
bidirectional characters of `app.domain.text_safety` (format characters, fillers,
Braille blanks, Khmer inherent vowels), combining marks on their own, and whitespace;
so ten zero-width spaces, twelve Hangul fillers or "x x x" are not a reason.
"""

from __future__ import annotations

import unicodedata

from app.domain.text_safety import classify

# Categories that draw nothing a reader can agree on: combining marks alone, private use,
# unassigned code points, and the object replacement character's category (So is kept
# for real symbols; U+FFFC is named below).
DRAW_NOTHING_AGREED = ("Mn", "Me", "Co", "Cn")
NOT_TEXT = frozenset({"\ufffc"})
MIN_VISIBLE_CHARACTERS = 12
MIN_WORDS = 2
MAX_REASON_CHARACTERS = 2000


def visible_text(text: str) -> str:
    """`text` without what draws nothing: invisible and bidirectional characters
    (`text_safety.classify`), combining marks alone, private-use and unassigned code
    points, the object replacement character; line feeds and tabs stay."""
    return "".join(
        ch
        for ch in text
        if ch in "\n\t"
        or (
            ch not in NOT_TEXT
            and classify(ch) not in ("invisible", "bidi")
            and unicodedata.category(ch) not in DRAW_NOTHING_AGREED
        )
    )


def reason_problem(reason: object) -> str | None:
    """Why `reason` is not a reason of substance, or None when it is one (FOUR-10).

    A reason of substance has, once what draws nothing (`visible_text`) and
    whitespace are left out, at least 12 visible characters, and at
    least two words (runs of visible characters separated by whitespace), and at most
    2,000 characters in all.

    Args:
        reason: as typed (anything: only text can pass).

    Returns:
        One sentence for the person at the command line, or None.
    """
    if not isinstance(reason, str) or not reason.strip():
        return "Give a reason: who asked, why no second admin can do it (e.g. an incident number)."
    if len(reason) > MAX_REASON_CHARACTERS:
        return f"Keep the reason under {MAX_REASON_CHARACTERS:,} characters."
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in reason):
        return "The reason holds control characters."
    words = visible_text(reason).split()
    if sum(len(word) for word in words) < MIN_VISIBLE_CHARACTERS or len(words) < MIN_WORDS:
        return (
            f"Give a reason of substance: at least {MIN_VISIBLE_CHARACTERS} visible characters in at least "
            f"{MIN_WORDS} words (invisible characters do not count)."
        )
    return None
