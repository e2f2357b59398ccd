"""An installation's DSA settings in words (SPEC §7 DSA-1, REV-3): every value the
admin page and the pending change's page show has a label here or in
`app.domain.dsa` (`RESTRICTION_TYPES`, `STATEMENT_CATEGORIES`, `DECISION_GROUNDS`,
`CONTENT_TYPES`); the Transparency Database's codes appear only in small print.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.domain import dsa
from app.domain.dsa_settings import ComponentRestriction, DecisionMeaning, DsaSettings, settings_from_json

RESTRICTIONS = {
    dsa.Restriction.VISIBILITY: "Restriction of the visibility of content",
    dsa.Restriction.MONETARY: "Restriction of monetary payments",
    dsa.Restriction.PROVISION: "Restriction of the provision of the service",
    dsa.Restriction.ACCOUNT: "Restriction of the account",
}
LANGUAGES = {"en": "English", "de": "German"}
COUNTRIES = {
    "AT": "Austria", "BE": "Belgium", "BG": "Bulgaria", "CY": "Cyprus", "CZ": "Czechia", "DE": "Germany",
    "DK": "Denmark", "EE": "Estonia", "ES": "Spain", "FI": "Finland", "FR": "France", "GR": "Greece",
    "HR": "Croatia", "HU": "Hungary", "IE": "Ireland", "IS": "Iceland", "IT": "Italy", "LI": "Liechtenstein",
    "LT": "Lithuania", "LU": "Luxembourg", "LV": "Latvia", "MT": "Malta", "NL": "Netherlands", "NO": "Norway",
    "PL": "Poland", "PT": "Portugal", "RO": "Romania", "SE": "Sweden", "SI": "Slovenia", "SK": "Slovakia",
}
NOT_A_RESTRICTION = "Not a restriction under the DSA"


def keyword_label(keyword: str) -> str:
    """A ``KEYWORD_*`` value in words (``KEYWORD_CYBER_HARASSMENT`` → "Cyber harassment")."""
    words = keyword.removeprefix("KEYWORD_").replace("_", " ").lower()
    return words[:1].upper() + words[1:]


def restriction_words(restriction: ComponentRestriction | None) -> str:
    """What a component's action is under the DSA, in words (DSA-1): its type's label
    and its kind, e.g. "Removal of content (restriction of the visibility of content)";
    `NOT_A_RESTRICTION` for None."""
    if restriction is None:
        return NOT_A_RESTRICTION
    types = dsa.RESTRICTION_TYPES[restriction.restriction]
    label = types.get(restriction.restriction_type, restriction.restriction_type)
    if restriction.restriction_type.endswith("_OTHER"):
        label = f"Other restriction: {restriction.other or 'not said'}"
    return f"{label} ({RESTRICTIONS[restriction.restriction].lower()})"


def _countries(codes: tuple[str, ...]) -> str:
    if set(codes) == dsa.EU_EEA_COUNTRIES:
        return "Every EU and EEA country"
    if set(codes) == dsa.EU_COUNTRIES:
        return "Every EU country"
    return ", ".join(COUNTRIES.get(code, code) for code in codes)


@dataclass(frozen=True)
class DecisionWords:
    """One decision code's meaning in words (DSA-1)."""

    code: str
    category: str
    category_code: str
    ground: str
    ground_code: str
    reference: str
    reference_url: str | None
    keywords: tuple[str, ...]
    illegal: str

    def line(self) -> str:
        """The meaning on one line, for the change page's comparison."""
        keywords = f"; keywords: {', '.join(self.keywords)}" if self.keywords else ""
        return (f"{self.code}: {self.category}; {self.ground}; {self.reference}"
                f"{' <' + self.reference_url + '>' if self.reference_url else ''}{keywords}; {self.illegal}")


def _decision_words(code: str, meaning: DecisionMeaning) -> DecisionWords:
    illegal = {True: "also illegal", False: "not illegal", None: "illegality not said"}[meaning.illegal]
    if meaning.ground is dsa.DecisionGround.ILLEGAL_CONTENT:
        illegal = "illegal"
    return DecisionWords(
        code=code,
        category=dsa.STATEMENT_CATEGORIES.get(meaning.category, meaning.category),
        category_code=meaning.category,
        ground=dsa.DECISION_GROUNDS.get(meaning.ground, meaning.ground),
        ground_code=meaning.ground.value,
        reference=meaning.reference,
        reference_url=meaning.reference_url,
        keywords=tuple(keyword_label(k) for k in meaning.keywords),
        illegal=illegal,
    )


@dataclass(frozen=True)
class SettingsWords:
    """The DSA settings as the admin page shows them (DSA-1, REV-3).

    Attributes:
        restrictions: (component slug, its restriction in words, the type's code).
        decisions: each decision code's meaning.
        content_types: (target kind, content types in words).
    """

    enabled: str
    restrictions: tuple[tuple[str, str, str], ...]
    decisions: tuple[DecisionWords, ...]
    content_types: tuple[tuple[str, str], ...]
    territorial_scope: str
    complaint_window: str
    notice_component: str
    notice_slug: str | None
    notice_languages: str
    default_language: str
    tdb_connection: str
    tdb_slug: str | None


def settings_words(settings: DsaSettings, connection_names: Mapping[str, str] | None = None) -> SettingsWords:
    """`settings` in words (DSA-1).

    Args:
        settings: the settings (in force or proposed).
        connection_names: connection slug -> its name, to name the Transparency
            Database connection (a slug without a name reads as itself).
    """
    names = connection_names or {}
    window = settings.complaint_window_days
    return SettingsWords(
        enabled="On: restricting actions get statements of reasons" if settings.enabled
        else "Off: no statements of reasons are made",
        restrictions=tuple(
            (slug, restriction_words(r), r.restriction_type) for slug, r in sorted(settings.restrictions.items())
        ),
        decisions=tuple(_decision_words(code, m) for code, m in sorted(settings.decisions.items())),
        content_types=tuple(
            (kind, ", ".join(dsa.CONTENT_TYPES.get(t, t) for t in types))
            for kind, types in sorted(settings.content_types.items())
        ),
        territorial_scope=_countries(settings.territorial_scope),
        complaint_window=f"{window} days (about {round(window / 30.44)} months) after the decision",
        notice_component=settings.notice_component or "None: affected users get no notice from the console",
        notice_slug=settings.notice_component,
        notice_languages=", ".join(LANGUAGES.get(code, code) for code in settings.notice_languages),
        default_language=LANGUAGES.get(settings.default_language, settings.default_language),
        tdb_connection=(names.get(settings.tdb_connection, settings.tdb_connection) if settings.tdb_connection
                        else "None: statements wait until a connection is set"),
        tdb_slug=settings.tdb_connection,
    )


def change_words(data: Mapping[str, Any]) -> dict[str, Any]:
    """A settings document as the pending change's page compares it, in words (DSA-1)."""
    words = settings_words(settings_from_json(data))
    return {
        "enabled": words.enabled,
        "restrictions": [f"{slug}: {text}" for slug, text, _ in words.restrictions],
        "decisions": [d.line() for d in words.decisions],
        "content_types": [f"{kind}: {types}" for kind, types in words.content_types],
        "territorial_scope": words.territorial_scope,
        "complaint_window": words.complaint_window,
        "notice_component": words.notice_component,
        "notice_languages": f"{words.notice_languages} (default {words.default_language})",
        "tdb_connection": words.tdb_connection,
    }


def allowed_values() -> list[tuple[str, list[tuple[str, str]]]]:
    """(what, [(code, label)]) of every enumerated value a document may use, for the
    form's reference list (DSA-1)."""
    return [
        ("restriction", [(r.value, label) for r, label in RESTRICTIONS.items()]),
        *[(f"type of a {r.value} restriction", list(types.items())) for r, types in dsa.RESTRICTION_TYPES.items()],
        ("category", sorted(dsa.STATEMENT_CATEGORIES.items())),
        ("ground", [(g.value, label) for g, label in dsa.DECISION_GROUNDS.items()]),
        ("keywords", [(k, keyword_label(k)) for k in sorted(dsa.KEYWORDS)]),
        ("content_types", sorted(dsa.CONTENT_TYPES.items())),
        ("territorial_scope", sorted(COUNTRIES.items())),
        ("notice_languages, default_language", list(LANGUAGES.items())),
    ]
