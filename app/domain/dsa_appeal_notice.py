"""The outcome notice of an appeal (SPEC §7 DSA-5; DSA Art. 20(4)-(5), Art. 21).

When a complaint is decided, the complainant is told the outcome in words, the
reason, and that they may refer the decision to a certified out-of-court dispute
settlement body (Art. 21) and take it to a court. Pure: the caller gives the facts,
this renders the text, in English or German like the Art. 17 notice
(`app.domain.dsa_settings.NOTICE_LANGUAGES`).

The text is plain (no markup): the platform sends it on as it wishes; the console
shows it escaped. The reason is the appeal decision's rationale as the reviewer
wrote it; a redacted or empty rationale is not shown, and the notice says that no
further reason was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.domain.dsa_settings import NOTICE_LANGUAGES

OUTCOMES = ("upheld", "modified", "reversed")
LANGUAGE_NAMES = {"en": "English", "de": "German (Deutsch)"}

_MONTHS = {
    "en": (
        "January February March April May June July August September October November December".split(),
        "{day} {month} {year}",
    ),
    "de": (
        "Januar Februar März April Mai Juni Juli August September Oktober November Dezember".split(),
        "{day}. {month} {year}",
    ),
}

_TEXT = {
    "en": {
        "title": "Decision on your complaint",
        "intro": "We have reviewed your complaint against our decision and decided on {date}:",
        "upheld": "We upheld our decision: it stays as it was.",
        "modified": "We changed our decision: the measure we took is modified.",
        "reversed": "We reversed our decision: the measure we took is being lifted.",
        "reason": "Reason: {reason}",
        "no_reason": "No further reason was recorded beyond this outcome.",
        "redress": (
            "If you disagree, you may refer this decision to an out-of-court dispute settlement body certified"
            " under Article 21 of the Digital Services Act (Regulation (EU) 2022/2065). You may"
            " also take the matter to a court at any time."
        ),
    },
    "de": {
        "title": "Entscheidung über Ihre Beschwerde",
        "intro": "Wir haben Ihre Beschwerde gegen unsere Entscheidung geprüft und am {date} entschieden:",
        "upheld": "Wir halten an unserer Entscheidung fest: Sie bleibt unverändert.",
        "modified": "Wir haben unsere Entscheidung geändert: Die ergriffene Maßnahme wird angepasst.",
        "reversed": "Wir haben unsere Entscheidung aufgehoben: Die ergriffene Maßnahme wird zurückgenommen.",
        "reason": "Begründung: {reason}",
        "no_reason": "Über dieses Ergebnis hinaus wurde keine Begründung festgehalten.",
        "redress": (
            "Wenn Sie mit dieser Entscheidung nicht einverstanden sind, können Sie sie einer nach Artikel 21 des"
            " Gesetzes über digitale Dienste (Verordnung (EU) 2022/2065) zertifizierten außergerichtlichen"
            " Streitbeilegungsstelle vorlegen. Sie können sich"
            " außerdem jederzeit an ein Gericht wenden."
        ),
    },
}


@dataclass(frozen=True)
class AppealNotice:
    """A rendered outcome notice (DSA-5).

    Attributes:
        language: ISO 639-1, lower case (``en``, ``de``).
        text: plain text, paragraphs separated by blank lines.
    """

    language: str
    text: str

    def as_json(self) -> dict[str, str]:
        """``{"language": ..., "text": ...}``, as the platform API gives it."""
        return {"language": self.language, "text": self.text}


def template_language(wanted: str | None) -> str | None:
    """`wanted` (any case, e.g. ``DE`` or ``de-AT``) as the code of a notice template
    (``de``), or None when there is no template in that language."""
    code = (wanted or "").strip().lower()[:2]
    return code if code in NOTICE_LANGUAGES else None


def notice_language(wanted: str | None, default: str = "en") -> str:
    """The notice's language: `wanted` when a template exists for it
    (`template_language`), else `default` when one exists, else English."""
    return template_language(wanted) or template_language(default) or "en"


def _date(value: datetime, language: str) -> str:
    months, form = _MONTHS[language]
    return form.format(day=value.day, month=months[value.month - 1], year=value.year)


def render_appeal_notice(*, outcome: str, reason: str | None, decided_at: datetime, language: str) -> AppealNotice:
    """The appeal's outcome notice in `language` (DSA-5, Art. 20(5), Art. 21).

    Args:
        outcome: ``upheld``, ``modified`` or ``reversed`` (the appeal decision's).
        reason: the appeal decision's rationale; None or blank when none was written
            or it was redacted.
        decided_at: when the appeal was decided (aware UTC; shown as a day).
        language: a `NOTICE_LANGUAGES` code (see `notice_language`).

    Returns:
        The `AppealNotice`: the outcome in words, the reason, and the referral to a
        certified out-of-court dispute settlement body and to a court.

    Raises:
        ValueError: an unknown outcome or language.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown appeal outcome {outcome!r}")
    if language not in _TEXT:
        raise ValueError(f"no outcome notice in {language!r}")
    words = _TEXT[language]
    reason = (reason or "").strip()
    paragraphs = [
        words["title"],
        words["intro"].format(date=_date(decided_at, language)) + " " + words[outcome],
        words["reason"].format(reason=reason) if reason else words["no_reason"],
        words["redress"],
    ]
    return AppealNotice(language, "\n\n".join(paragraphs))
