"""An installation's DSA settings (SPEC §7 DSA-1): whether statements of reasons are
made, which restriction each component's action is, and what each decision code
means in the Transparency Database's terms.

One JSON document, changed only by a four-eyes change (``dsa.settings``): it decides
what statements say, what notices tell users and where statements go, so no admin
writes it alone (FOUR-4). Shape::

    {"enabled": true,
     "restrictions": {"<component slug>": {"restriction": "visibility",
                                           "type": "DECISION_VISIBILITY_CONTENT_REMOVED",
                                           "other": null}},
     "decisions": {"<decision code>": {"category": "STATEMENT_CATEGORY_...",
                                       "ground": "DECISION_GROUND_...",
                                       "reference": "Terms of service, section 4.2",
                                       "reference_url": "https://...", "keywords": ["KEYWORD_..."],
                                       "illegal": false}},
     "content_types": {"<target kind>": ["CONTENT_TYPE_TEXT"]},
     "territorial_scope": ["AT", "BE", ...],
     "complaint_window_days": 183,
     "notice_component": "notify_user",
     "notice_languages": ["en", "de"], "default_language": "en",
     "tdb_connection": "<connection slug>"}

A component or decision code that is not listed restricts nothing / cannot yield a
statement: a restricting action whose decision code is unmapped is refused at
decision time (DSA-2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from app.domain import dsa

MIN_COMPLAINT_WINDOW_DAYS = 183  # Art. 20(1): complaints for at least six months
NOTICE_LANGUAGES = ("en", "de")  # the languages the notice templates exist in (DSA-4)
DEFAULT_CONTENT_TYPES = {
    "post": ("CONTENT_TYPE_TEXT",),
    "comment": ("CONTENT_TYPE_TEXT",),
    "record": ("CONTENT_TYPE_TEXT",),
}


@dataclass(frozen=True)
class ComponentRestriction:
    """The DSA restriction a component's action is (DSA-1).

    Attributes:
        restriction: visibility, monetary, provision or account (`dsa.Restriction`).
        restriction_type: its ``DECISION_*`` value (`dsa.RESTRICTION_TYPES`).
        other: the words for an ``*_OTHER`` type.
    """

    restriction: dsa.Restriction
    restriction_type: str
    other: str | None = None


@dataclass(frozen=True)
class DecisionMeaning:
    """What a decision code means in a statement of reasons (DSA-1).

    Attributes:
        category: ``STATEMENT_CATEGORY_*``.
        ground: illegal content, or incompatible with the terms.
        reference: the legal ground (illegal) or the contractual ground.
        reference_url: the law or the terms, a URL.
        keywords: ``KEYWORD_*`` values (category specification).
        illegal: for incompatible content, whether it is also illegal.
    """

    category: str
    ground: dsa.DecisionGround
    reference: str
    reference_url: str | None = None
    keywords: tuple[str, ...] = ()
    illegal: bool | None = None


@dataclass(frozen=True)
class DsaSettings:
    """An installation's DSA settings in force (DSA-1); `DEFAULT_SETTINGS` is off."""

    enabled: bool = False
    restrictions: Mapping[str, ComponentRestriction] = field(default_factory=dict)
    decisions: Mapping[str, DecisionMeaning] = field(default_factory=dict)
    content_types: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_CONTENT_TYPES))
    territorial_scope: tuple[str, ...] = tuple(sorted(dsa.EU_EEA_COUNTRIES))
    complaint_window_days: int = MIN_COMPLAINT_WINDOW_DAYS
    notice_component: str | None = None
    notice_languages: tuple[str, ...] = NOTICE_LANGUAGES
    default_language: str = "en"
    tdb_connection: str | None = None

    def restriction_of(self, component_slug: str | None) -> ComponentRestriction | None:
        """The restriction a component's action is, when DSA is on and it declares one."""
        return self.restrictions.get(component_slug or "") if self.enabled else None


DEFAULT_SETTINGS = DsaSettings()

_CODE = {"type": "string", "pattern": r"^[a-z][a-z0-9_.-]{0,99}$"}
_TEXT = {"type": "string", "minLength": 1, "maxLength": dsa.MAX_SHORT, "pattern": r"^[^\x00-\x08\x0b-\x1f\x7f]+$"}
SETTINGS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["enabled"],
    "properties": {
        "enabled": {"type": "boolean"},
        "restrictions": {
            "type": "object",
            "propertyNames": _CODE,
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["restriction", "type"],
                "properties": {
                    "restriction": {"enum": [r.value for r in dsa.Restriction]},
                    "type": {"type": "string"},
                    "other": {"anyOf": [_TEXT, {"type": "null"}]},
                },
            },
        },
        "decisions": {
            "type": "object",
            "propertyNames": _CODE,
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["category", "ground", "reference"],
                "properties": {
                    "category": {"enum": sorted(dsa.STATEMENT_CATEGORIES)},
                    "ground": {"enum": [g.value for g in dsa.DecisionGround]},
                    "reference": _TEXT,
                    "reference_url": {"anyOf": [{"type": "string", "maxLength": dsa.MAX_SHORT}, {"type": "null"}]},
                    "keywords": {"type": "array", "maxItems": 10, "items": {"enum": sorted(dsa.KEYWORDS)}},
                    "illegal": {"type": ["boolean", "null"]},
                },
            },
        },
        "content_types": {
            "type": "object",
            "propertyNames": _CODE,
            "additionalProperties": {
                "type": "array", "minItems": 1, "items": {"enum": sorted(dsa.CONTENT_TYPES)}, "uniqueItems": True,
            },
        },
        "territorial_scope": {
            "type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": sorted(dsa.EU_EEA_COUNTRIES)},
        },
        "complaint_window_days": {"type": "integer", "minimum": MIN_COMPLAINT_WINDOW_DAYS, "maximum": 3660},
        "notice_component": {"anyOf": [_CODE, {"type": "null"}]},
        "notice_languages": {
            "type": "array", "minItems": 1, "uniqueItems": True, "items": {"enum": list(NOTICE_LANGUAGES)},
        },
        "default_language": {"enum": list(NOTICE_LANGUAGES)},
        "tdb_connection": {"anyOf": [_CODE, {"type": "null"}]},
    },
}
_VALIDATOR = Draft202012Validator(SETTINGS_SCHEMA)
MAX_PROBLEMS = 20


def _place(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path) or "the document"


def _message(error) -> str:
    """A schema error in words; a long list of allowed values is not repeated (the
    admin page lists them with their labels)."""
    if error.validator == "enum" and len(error.validator_value) > 8:
        count = len(error.validator_value)
        return f"{error.instance!r} is not one of the {count} allowed values (see the list of allowed values)."
    return error.message[:300]


def settings_problems(
    data: Any, *, components: Iterable[str] | None = None, connections: Iterable[str] | None = None
) -> list[str]:
    """Every problem in a DSA settings document, in words, at once (DSA-1).

    Args:
        data: the parsed JSON document.
        components: component slugs of the installation (None: not checked); a
            restriction or notice component naming another is a problem.
        connections: connection slugs (None: not checked).

    Returns:
        Sentences, at most `MAX_PROBLEMS`; empty when the document can be saved.
    """
    problems = [
        f"{_place(error.absolute_path)}: {_message(error)}"
        for error in sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if not isinstance(data, dict):
        return problems[:MAX_PROBLEMS] or ["The settings must be a JSON object."]
    # What the schema cannot say, read type-safely so that it is said alongside the shape's problems
    problems += _restriction_problems(data.get("restrictions"), components)
    decisions = data.get("decisions")
    for code, meaning in (decisions.items() if isinstance(decisions, dict) else ()):
        url = meaning.get("reference_url") if isinstance(meaning, dict) else None
        if isinstance(url, str) and url and dsa.statement_problems({"decision_ground_reference_url": url}).get(
            "decision_ground_reference_url"
        ):
            problems.append(f"decisions.{code}.reference_url: must be an http(s) URL.")
    notice = data.get("notice_component")
    if isinstance(notice, str) and notice and components is not None and notice not in set(components):
        problems.append(f"notice_component: no component has the slug {notice}.")
    default, languages = data.get("default_language"), data.get("notice_languages")
    if isinstance(default, str) and default and isinstance(languages, list) and languages and default not in languages:
        problems.append("default_language: must be one of notice_languages.")
    connection = data.get("tdb_connection")
    if isinstance(connection, str) and connection and connections is not None and connection not in set(connections):
        problems.append(f"tdb_connection: no connection has the slug {connection}.")
    return problems[:MAX_PROBLEMS]


def _restriction_problems(restrictions: Any, components: Iterable[str] | None) -> list[str]:
    """A declared type of another kind of restriction, an "other" type without its
    words, a slug no component has (DSA-1); values of the wrong type are the schema's."""
    problems: list[str] = []
    known = set(components) if components is not None else None
    for slug, declared in (restrictions.items() if isinstance(restrictions, dict) else ()):
        if known is not None and slug not in known:
            problems.append(f"restrictions.{slug}: no component has this slug.")
        value = declared.get("restriction") if isinstance(declared, dict) else None
        if not isinstance(value, str) or value not in {r.value for r in dsa.Restriction}:
            continue
        restriction, kind = dsa.Restriction(declared["restriction"]), declared.get("type")
        if isinstance(kind, str) and kind not in dsa.RESTRICTION_TYPES[restriction]:
            problems.append(f"restrictions.{slug}.type: {kind} is not a type of {restriction.value} restriction.")
        elif isinstance(kind, str) and kind.endswith("_OTHER") and not declared.get("other"):
            problems.append(f"restrictions.{slug}.other: say what the other restriction is.")
    return problems


def settings_from_json(data: Mapping[str, Any]) -> DsaSettings:
    """The `DsaSettings` of a document `settings_problems` accepted (DSA-1)."""
    restrictions = {
        slug: ComponentRestriction(dsa.Restriction(item["restriction"]), item["type"], item.get("other"))
        for slug, item in (data.get("restrictions") or {}).items()
    }
    decisions = {
        code: DecisionMeaning(
            category=item["category"],
            ground=dsa.DecisionGround(item["ground"]),
            reference=item["reference"],
            reference_url=item.get("reference_url"),
            keywords=tuple(item.get("keywords") or ()),
            illegal=item.get("illegal"),
        )
        for code, item in (data.get("decisions") or {}).items()
    }
    content_types = {**DEFAULT_CONTENT_TYPES, **{k: tuple(v) for k, v in (data.get("content_types") or {}).items()}}
    return DsaSettings(
        enabled=bool(data.get("enabled")),
        restrictions=restrictions,
        decisions=decisions,
        content_types=content_types,
        territorial_scope=tuple(data.get("territorial_scope") or DEFAULT_SETTINGS.territorial_scope),
        complaint_window_days=int(data.get("complaint_window_days") or MIN_COMPLAINT_WINDOW_DAYS),
        notice_component=data.get("notice_component"),
        notice_languages=tuple(data.get("notice_languages") or NOTICE_LANGUAGES),
        default_language=data.get("default_language") or "en",
        tdb_connection=data.get("tdb_connection"),
    )


def settings_to_json(settings: DsaSettings) -> dict[str, Any]:
    """The document of `settings` (the inverse of `settings_from_json`)."""
    return {
        "enabled": settings.enabled,
        "restrictions": {
            slug: {"restriction": r.restriction.value, "type": r.restriction_type, "other": r.other}
            for slug, r in settings.restrictions.items()
        },
        "decisions": {
            code: {
                "category": m.category, "ground": m.ground.value, "reference": m.reference,
                "reference_url": m.reference_url, "keywords": list(m.keywords), "illegal": m.illegal,
            }
            for code, m in settings.decisions.items()
        },
        "content_types": {kind: list(types) for kind, types in settings.content_types.items()},
        "territorial_scope": list(settings.territorial_scope),
        "complaint_window_days": settings.complaint_window_days,
        "notice_component": settings.notice_component,
        "notice_languages": list(settings.notice_languages),
        "default_language": settings.default_language,
        "tdb_connection": settings.tdb_connection,
    }
