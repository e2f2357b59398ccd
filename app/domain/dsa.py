"""Statements of reasons for the DSA Transparency Database, API v2 (SPEC §7 DSA-2).

What a restriction's records give (`StatementFacts`), the statement of reasons they
make (`build_statement`, the API's JSON body), its `puid` (`puid_for`) and the
Transparency Database's validation rules checked here, before anything is stored or
sent (`statement_problems`), so a decision that cannot yield a valid statement is
refused when it is taken, naming the missing fact.

Source: the public repository ``digital-services-act/transparency-database``
(snapshot of 2026-06-24): ``resources/markdown/api-documentation.md`` — into which
``api-documentation-two.md`` and ``migration-to-api-v-two.md`` were merged on
2025-03-24 — its changelog (the schema of 1 July 2025, the categories and keywords
of the Transparency Reporting Implementing Regulation), the enumerations of
``app/Models/Statement.php``, ``app/Services/EuropeanCountriesService.php`` and
``EuropeanLanguagesService.php``, and the rules of
``app/Http/Requests/StatementStoreRequest.php`` (single statement) and
``app/Services/GroupedSubmissionsService.php`` (batch). The v2 schema is served at
the same paths as before (``/api/v1/statement``, ``/api/v1/statements``).

Documented rules implemented by `statement_problems` (field -> message, the
Transparency Database's own wording):

* required: ``decision_ground``, ``content_type`` (array, at least one),
  ``category``, ``decision_facts`` (≤ 5000 characters), ``source_type``,
  ``automated_detection`` (``Yes``/``No``), ``automated_decision``, ``puid``,
  ``application_date`` and ``content_date``; ``territorial_scope`` is documented as
  required (an array of EU/EEA codes; the server's code accepts it absent — we keep
  the documented, stricter rule);
* at least one of ``decision_visibility`` (an array), ``decision_monetary``,
  ``decision_provision``, ``decision_account``;
* ``*_other`` required with the ``OTHER`` value of visibility, monetary and
  content type (≤ 500 characters);
* ground ``DECISION_GROUND_ILLEGAL_CONTENT`` requires ``illegal_content_legal_ground``
  (≤ 500) and ``illegal_content_explanation`` (≤ 2000); ground
  ``DECISION_GROUND_INCOMPATIBLE_CONTENT`` requires ``incompatible_content_ground``
  (≤ 500) and ``incompatible_content_explanation`` (≤ 2000);
  ``incompatible_content_illegal`` is ``Yes``/``No``;
* dates ``YYYY-MM-DD`` with leading zeroes: ``application_date`` from 2020-01-01,
  ``content_date`` from 2000-01-01, none after 2038-01-01; each ``end_date_*`` blank
  for indefinite, else on or after the application date (documented; not enforced
  by the server's code — kept, stricter);
* ``puid``: at most 500 characters of ``[A-Za-z0-9_-]``;
* every enumerated value from the lists below; ``decision_ground_reference_url`` a
  URL of at most 500 characters; ``content_language`` an ISO 639-1 code in capitals;
  ``content_id`` only ``{"EAN-13": 13 digits}``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

# -- enumerations (app/Models/Statement.php, API v2) -------------------------------


class Restriction(StrEnum):
    """Which DSA restriction an action is (a component declares it, DSA-1): the
    statement's ``decision_*`` field it fills and the ``end_date_*`` it ends by."""

    VISIBILITY = "visibility"
    MONETARY = "monetary"
    PROVISION = "provision"
    ACCOUNT = "account"


DECISION_FIELD = {
    Restriction.VISIBILITY: "decision_visibility",
    Restriction.MONETARY: "decision_monetary",
    Restriction.PROVISION: "decision_provision",
    Restriction.ACCOUNT: "decision_account",
}
END_DATE_FIELD = {
    Restriction.VISIBILITY: "end_date_visibility_restriction",
    Restriction.MONETARY: "end_date_monetary_restriction",
    Restriction.PROVISION: "end_date_service_restriction",
    Restriction.ACCOUNT: "end_date_account_restriction",
}

DECISION_VISIBILITIES = {
    "DECISION_VISIBILITY_CONTENT_REMOVED": "Removal of content",
    "DECISION_VISIBILITY_CONTENT_DISABLED": "Disabling access to content",
    "DECISION_VISIBILITY_CONTENT_DEMOTED": "Demotion of content",
    "DECISION_VISIBILITY_CONTENT_AGE_RESTRICTED": "Age restricted content",
    "DECISION_VISIBILITY_CONTENT_INTERACTION_RESTRICTED": "Restricting interaction with content",
    "DECISION_VISIBILITY_CONTENT_LABELLED": "Labelled content",
    "DECISION_VISIBILITY_OTHER": "Other restriction (please specify)",
}
DECISION_MONETARIES = {
    "DECISION_MONETARY_SUSPENSION": "Suspension of monetary payments",
    "DECISION_MONETARY_TERMINATION": "Termination of monetary payments",
    "DECISION_MONETARY_OTHER": "Other restriction (please specify)",
}
DECISION_PROVISIONS = {
    "DECISION_PROVISION_PARTIAL_SUSPENSION": "Partial suspension of the provision of the service",
    "DECISION_PROVISION_TOTAL_SUSPENSION": "Total suspension of the provision of the service",
    "DECISION_PROVISION_PARTIAL_TERMINATION": "Partial termination of the provision of the service",
    "DECISION_PROVISION_TOTAL_TERMINATION": "Total termination of the provision of the service",
}
DECISION_ACCOUNTS = {
    "DECISION_ACCOUNT_SUSPENDED": "Suspension of the account",
    "DECISION_ACCOUNT_TERMINATED": "Termination of the account",
}
RESTRICTION_TYPES = {
    Restriction.VISIBILITY: DECISION_VISIBILITIES,
    Restriction.MONETARY: DECISION_MONETARIES,
    Restriction.PROVISION: DECISION_PROVISIONS,
    Restriction.ACCOUNT: DECISION_ACCOUNTS,
}
ACCOUNT_TYPES = {"ACCOUNT_TYPE_BUSINESS": "Business", "ACCOUNT_TYPE_PRIVATE": "Private"}


class DecisionGround(StrEnum):
    ILLEGAL_CONTENT = "DECISION_GROUND_ILLEGAL_CONTENT"
    INCOMPATIBLE_CONTENT = "DECISION_GROUND_INCOMPATIBLE_CONTENT"


DECISION_GROUNDS = {
    DecisionGround.ILLEGAL_CONTENT: "Illegal content",
    DecisionGround.INCOMPATIBLE_CONTENT: "Content incompatible with terms and conditions",
}


class SourceType(StrEnum):
    ARTICLE_16 = "SOURCE_ARTICLE_16"
    TRUSTED_FLAGGER = "SOURCE_TRUSTED_FLAGGER"
    OTHER_NOTIFICATION = "SOURCE_TYPE_OTHER_NOTIFICATION"
    VOLUNTARY = "SOURCE_VOLUNTARY"


SOURCE_TYPES = {
    SourceType.ARTICLE_16: "Notice submitted in accordance with Article 16 DSA",
    SourceType.TRUSTED_FLAGGER: "Notice submitted by a trusted flagger",
    SourceType.OTHER_NOTIFICATION: "Other type of notification",
    SourceType.VOLUNTARY: "Own voluntary initiative",
}


class AutomatedDecision(StrEnum):
    FULLY = "AUTOMATED_DECISION_FULLY"
    PARTIALLY = "AUTOMATED_DECISION_PARTIALLY"
    NOT_AUTOMATED = "AUTOMATED_DECISION_NOT_AUTOMATED"


AUTOMATED_DECISIONS = {
    AutomatedDecision.FULLY: "Fully automated",
    AutomatedDecision.PARTIALLY: "Partially automated",
    AutomatedDecision.NOT_AUTOMATED: "Not automated",
}
YES_NO = ("Yes", "No")  # automated_detection, incompatible_content_illegal

CONTENT_TYPES = {
    "CONTENT_TYPE_APP": "App",
    "CONTENT_TYPE_AUDIO": "Audio",
    "CONTENT_TYPE_IMAGE": "Image",
    "CONTENT_TYPE_PRODUCT": "Product",
    "CONTENT_TYPE_SYNTHETIC_MEDIA": "Synthetic Media",
    "CONTENT_TYPE_TEXT": "Text",
    "CONTENT_TYPE_VIDEO": "Video",
    "CONTENT_TYPE_OTHER": "Other",
}

# The categories of API v2 (1 July 2025): v1's UNSAFE_AND_ILLEGAL_PRODUCTS,
# SCOPE_OF_PLATFORM_SERVICE, NON_CONSENSUAL_BEHAVIOUR and
# PORNOGRAPHY_OR_SEXUALIZED_CONTENT are gone.
STATEMENT_CATEGORIES = {
    "STATEMENT_CATEGORY_ANIMAL_WELFARE": "Animal welfare",
    "STATEMENT_CATEGORY_CONSUMER_INFORMATION": "Consumer information infringements",
    "STATEMENT_CATEGORY_CYBER_VIOLENCE": "Cyber violence",
    "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN": "Cyber violence against women",
    "STATEMENT_CATEGORY_DATA_PROTECTION_AND_PRIVACY_VIOLATIONS": "Data protection and privacy violations",
    "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH": "Illegal or harmful speech",
    "STATEMENT_CATEGORY_INTELLECTUAL_PROPERTY_INFRINGEMENTS": "Intellectual property infringements",
    "STATEMENT_CATEGORY_NEGATIVE_EFFECTS_ON_CIVIC_DISCOURSE_OR_ELECTIONS": (
        "Negative effects on civic discourse or elections"
    ),
    "STATEMENT_CATEGORY_NOT_SPECIFIED_NOTICE": "Type of alleged illegal content not specified by the notifier",
    "STATEMENT_CATEGORY_OTHER_VIOLATION_TC": "Other violation of provider’s terms and conditions",
    "STATEMENT_CATEGORY_PROTECTION_OF_MINORS": "Protection of minors",
    "STATEMENT_CATEGORY_RISK_FOR_PUBLIC_SECURITY": "Risk for public security",
    "STATEMENT_CATEGORY_SCAMS_AND_FRAUD": "Scams and/or fraud",
    "STATEMENT_CATEGORY_SELF_HARM": "Self-harm",
    "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS": "Unsafe, non-compliant or prohibited products",
    "STATEMENT_CATEGORY_VIOLENCE": "Violence",
}

# category_specification (API v2 keywords); their labels are in the documentation.
KEYWORDS = frozenset(
    "KEYWORD_" + name
    for name in """ADULT_SEXUAL_MATERIAL AGE_SPECIFIC_RESTRICTIONS AGE_SPECIFIC_RESTRICTIONS_MINORS ANIMAL_HARM
    BIOMETRIC_DATA_BREACH BULLYING_AGAINST_GIRLS CHILD_SEXUAL_ABUSE_MATERIAL CHILD_SEXUAL_ABUSE_MATERIAL_DEEPFAKE
    CONTENT_PROMOTING_EATING_DISORDERS COORDINATED_HARM COPYRIGHT_INFRINGEMENT CYBER_BULLYING_INTIMIDATION
    CYBER_HARASSMENT CYBER_HARASSMENT_AGAINST_WOMEN CYBER_INCITEMENT CYBER_STALKING CYBER_STALKING_AGAINST_WOMEN
    DATA_FALSIFICATION DEFAMATION DESIGN_INFRINGEMENT DISCRIMINATION FEMALE_GENDERED_DISINFORMATION
    GEOGRAPHIC_INDICATIONS_INFRINGEMENT GEOGRAPHICAL_REQUIREMENTS GOODS_SERVICES_NOT_PERMITTED
    GROOMING_SEXUAL_ENTICEMENT_MINORS HATE_SPEECH HIDDEN_ADVERTISEMENT HUMAN_EXPLOITATION HUMAN_TRAFFICKING
    ILLEGAL_ORGANIZATIONS IMPERSONATION_ACCOUNT_HIJACKING INAUTHENTIC_ACCOUNTS INAUTHENTIC_LISTINGS
    INAUTHENTIC_USER_REVIEWS INCITEMENT_AGAINST_WOMEN INCITEMENT_VIOLENCE_HATRED INSUFFICIENT_INFORMATION_ON_TRADERS
    LANGUAGE_REQUIREMENTS MISINFORMATION_DISINFORMATION MISLEADING_INFO_CONSUMER_RIGHTS
    MISLEADING_INFO_GOODS_SERVICES MISSING_PROCESSING_GROUND NON_CONSENSUAL_IMAGE_SHARING
    NON_CONSENSUAL_IMAGE_SHARING_AGAINST_WOMEN NON_CONSENSUAL_MATERIAL_DEEPFAKE
    NON_CONSENSUAL_MATERIAL_DEEPFAKE_AGAINST_WOMEN NONCOMPLIANCE_PRICING NUDITY PATENT_INFRINGEMENT PHISHING
    PROHIBITED_PRODUCTS PYRAMID_SCHEMES RIGHT_TO_BE_FORGOTTEN RISK_ENVIRONMENTAL_DAMAGE RISK_PUBLIC_HEALTH
    SELF_MUTILATION STALKING SUICIDE TERRORIST_CONTENT TRADE_SECRET_INFRINGEMENT TRADEMARK_INFRINGEMENT
    TRAFFICKING_WOMEN_GIRLS UNLAWFUL_SALE_ANIMALS UNSAFE_CHALLENGES UNSAFE_PRODUCTS VIOLATION_EU_LAW
    VIOLATION_NATIONAL_LAW OTHER""".split()
)

# territorial_scope: EU/EEA countries (EuropeanCountriesService::EUROPEAN_COUNTRY_CODES).
EU_EEA_COUNTRIES = frozenset(
    "AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IS IT LI LT LU LV MT NL NO PL PT RO SE SI SK".split()
)
EU_COUNTRIES = EU_EEA_COUNTRIES - {"IS", "LI", "NO"}

# content_language: ISO 639-1 in capitals (EuropeanLanguagesService::ALL_LANGUAGES).
LANGUAGES = frozenset(
    """AB AA AF AK SQ AM AR AN HY AS AV AE AY AZ BM BA EU BE BN BH BI BS BR BG MY CA KM CH CE NY ZH CU CV KW CO
    CR HR CS DA DV NL DZ EN EO ET EE FO FJ FI FR FF GD GL LG KA DE KI EL KL GN GU HT HA HE HZ HI HO HU IS IO IG ID
    IA IE IU IK GA IT JA JV KN KR KS KK RW KV KG KO KJ KU KY LO LA LV LB LI LN LT LU MK MG MS ML MT GV MI MR MH RO
    MN NA NV ND NG NE SE NO NB NN II OC OJ OR OM OS PI PA PS FA PL PT QU RM RN RU SM SG SA SC SR SN SD SI SK SL SO
    ST NR ES SU SW SS SV TL TY TG TA TT TE TH BO TI TO TS TN TR TK TW UG UK UR UZ VE VI VO WA CY FY WO XH YI YO ZA
    ZU""".split()
)

# -- limits ------------------------------------------------------------------------

MAX_PUID = 500
MAX_FACTS = 5000
MAX_EXPLANATION = 2000
MAX_SHORT = 500  # grounds, *_other, source identity, reference URL
BATCH_MAX = 100  # statements per call of the batch endpoint
RATE_LIMIT_PER_SECOND = 200  # per API user; 12000 per minute; 429 beyond
PUID_PATTERN = re.compile(r"^[A-Za-z0-9_-]+\Z")
DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")
EAN13 = re.compile(r"^[0-9]{13}\Z")
FIRST_APPLICATION_DATE = date(2020, 1, 1)
FIRST_CONTENT_DATE = date(2000, 1, 1)
LAST_DATE = date(2038, 1, 1)
OTHER_VALUES = {
    "decision_visibility": "DECISION_VISIBILITY_OTHER",
    "decision_monetary": "DECISION_MONETARY_OTHER",
    "content_type": "CONTENT_TYPE_OTHER",
}


def puid_for(proposal_id: str) -> str:
    """The statement's platform unique identifier, derived from its proposal (DSA-2).

    The same proposal always gives the same puid, so building a statement again, or
    sending it again after an answer was lost, cannot make a second statement: the
    Transparency Database refuses a puid it holds (``existing_puids``). A proposal
    id holds ``:`` and may be 700 characters; the puid is ``sor-`` and the SHA-256
    of the id in hex (68 characters of ``[a-z0-9-]``).

    Args:
        proposal_id: the restriction's proposal id.
    """
    return "sor-" + hashlib.sha256(proposal_id.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StatementFacts:
    """What the console's records say about one applied restriction (DSA-2).

    Attributes:
        proposal_id: the restriction's proposal (its puid comes from it).
        restriction: which restriction the action is (its component's declaration).
        restriction_type: that restriction's value, e.g.
            ``DECISION_VISIBILITY_CONTENT_REMOVED`` (`RESTRICTION_TYPES`).
        category: ``STATEMENT_CATEGORY_*`` of the decision code.
        ground: illegal content, or incompatible with the terms.
        ground_reference: the legal ground (illegal) or the contractual ground
            (incompatible) the decision code names.
        explanation: why the content is illegal / incompatible on that ground (the
            decision's rationale).
        decision_facts: the facts and circumstances relied on.
        source_type: where the report came from (``SOURCE_*``).
        automated_detection: whether automated means detected the content.
        automated_decision: fully, partially or not automated.
        content_types: ``CONTENT_TYPE_*`` values, at least one.
        territorial_scope: EU/EEA country codes where the restriction applies.
        application_date: the day the restriction applied (the applied receipt).
        content_date: the day the content was posted or uploaded.
        end_date: the day a temporary restriction ends (its reversal); None for
            indefinite.
        restriction_other: the restriction when its type is ``*_OTHER``.
        content_type_other: the content type when ``CONTENT_TYPE_OTHER``.
        account_type: ``ACCOUNT_TYPE_*`` of the affected account, if known.
        reference_url: the terms or the law relied on, a URL.
        incompatible_content_illegal: for incompatible content, whether it is also
            illegal (None: not said).
        category_specification: ``KEYWORD_*`` values.
        category_specification_other: the keyword when ``KEYWORD_OTHER``.
        content_language: ISO 639-1 code in capitals.
        source_identity: the notifier, when the source is not voluntary.
        ean13: a product's EAN-13 code (``content_id``).
    """

    proposal_id: str
    restriction: Restriction | str | None
    restriction_type: str | None
    category: str | None
    ground: DecisionGround | str | None
    ground_reference: str | None
    explanation: str | None
    decision_facts: str | None
    source_type: SourceType | str | None
    automated_detection: bool | None
    automated_decision: AutomatedDecision | str | None
    content_types: tuple[str, ...] = ()
    territorial_scope: tuple[str, ...] = ()
    application_date: date | None = None
    content_date: date | None = None
    end_date: date | None = None
    restriction_other: str | None = None
    content_type_other: str | None = None
    account_type: str | None = None
    reference_url: str | None = None
    incompatible_content_illegal: bool | None = None
    category_specification: tuple[str, ...] = ()
    category_specification_other: str | None = None
    content_language: str | None = None
    source_identity: str | None = None
    ean13: str | None = None


def _day(value: date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value.date()
    return value.isoformat()


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else ("Yes" if value else "No")


def build_statement(facts: StatementFacts) -> dict[str, Any]:
    """The statement of reasons for `facts`: the API v2 JSON body of one statement
    (DSA-2). Absent facts are left out, so `statement_problems` names them.

    The restriction fills its ``decision_*`` field (visibility as a one-value array)
    and its ``end_date_*`` (blank: indefinite); the ground fills the illegal-content
    or the incompatible-content pair; booleans become ``Yes``/``No``; days
    ``YYYY-MM-DD``. Nothing is checked here.

    Args:
        facts: the restriction's facts.

    Returns:
        A JSON-compatible dict (no None values).
    """
    statement: dict[str, Any] = {"puid": puid_for(facts.proposal_id)}
    restriction = _member(Restriction, facts.restriction)
    if restriction is not None and facts.restriction_type:
        field = DECISION_FIELD[restriction]
        statement[field] = [facts.restriction_type] if restriction is Restriction.VISIBILITY else facts.restriction_type
        if field in OTHER_VALUES and facts.restriction_type == OTHER_VALUES[field]:
            statement[f"{field}_other"] = facts.restriction_other
        if facts.end_date is not None:
            statement[END_DATE_FIELD[restriction]] = _day(facts.end_date)
    ground = _member(DecisionGround, facts.ground)
    statement["decision_ground"] = str(facts.ground) if facts.ground else None
    if ground is DecisionGround.ILLEGAL_CONTENT:
        statement["illegal_content_legal_ground"] = facts.ground_reference
        statement["illegal_content_explanation"] = facts.explanation
    elif ground is DecisionGround.INCOMPATIBLE_CONTENT:
        statement["incompatible_content_ground"] = facts.ground_reference
        statement["incompatible_content_explanation"] = facts.explanation
        statement["incompatible_content_illegal"] = _yes_no(facts.incompatible_content_illegal)
    statement.update(
        {
            "decision_ground_reference_url": facts.reference_url,
            "category": facts.category,
            "category_specification": list(facts.category_specification) or None,
            "category_specification_other": facts.category_specification_other
            if "KEYWORD_OTHER" in facts.category_specification
            else None,
            "content_type": list(facts.content_types) or None,
            "content_type_other": facts.content_type_other if "CONTENT_TYPE_OTHER" in facts.content_types else None,
            "account_type": facts.account_type,
            "territorial_scope": sorted(set(facts.territorial_scope)) or None,
            "content_language": facts.content_language,
            "content_date": _day(facts.content_date),
            "application_date": _day(facts.application_date),
            "decision_facts": facts.decision_facts,
            "source_type": str(facts.source_type) if facts.source_type else None,
            "source_identity": facts.source_identity if facts.source_type != SourceType.VOLUNTARY else None,
            "automated_detection": _yes_no(facts.automated_detection),
            "automated_decision": str(facts.automated_decision) if facts.automated_decision else None,
            "content_id": {"EAN-13": facts.ean13} if facts.ean13 else None,
        }
    )
    return {key: value for key, value in statement.items() if value is not None}


def _member(enum: type[StrEnum], value) -> Any:
    try:
        return enum(value) if value else None
    except ValueError:
        return None


# -- validation --------------------------------------------------------------------

REQUIRED = (
    "decision_ground",
    "content_type",
    "category",
    "application_date",
    "content_date",
    "decision_facts",
    "source_type",
    "automated_detection",
    "automated_decision",
    "territorial_scope",
    "puid",
)
DECISIONS = tuple(DECISION_FIELD.values())


def _words(field: str) -> str:
    return field.replace("_", " ")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | dict) and len(value) == 0)


def _parse_day(value: Any) -> date | None:
    if not isinstance(value, str) or not DATE_PATTERN.match(value):
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def statement_problems(statement: dict[str, Any]) -> dict[str, str]:
    """What the Transparency Database would refuse in `statement` (DSA-2).

    The documented rules of the module docstring, checked locally so a decision
    that cannot yield a valid statement is refused when it is taken.

    Args:
        statement: one statement's JSON body (`build_statement`'s result, or as read
            back from a stored row).

    Returns:
        Field -> a sentence in the Transparency Database's words; empty when valid.
        A missing fact is named by its field, e.g. ``{"content_date": "The content
        date field is required."}``.
    """
    problems: dict[str, str] = {}

    def refuse(field: str, message: str) -> None:
        problems.setdefault(field, message)

    for field in REQUIRED:
        if _blank(statement.get(field)):
            refuse(field, f"The {_words(field)} field is required.")
    if all(_blank(statement.get(field)) for field in DECISIONS):
        for field in DECISIONS:
            others = " / ".join(_words(f) for f in DECISIONS if f != field)
            refuse(field, f"The {_words(field)} field is required when none of {others} are present.")

    _check_enumerations(statement, refuse)
    _check_conditionals(statement, refuse)
    _check_dates(statement, refuse)

    puid = statement.get("puid")
    if not _blank(puid):
        if not isinstance(puid, str) or len(puid) > MAX_PUID:
            refuse("puid", f"The puid field must not be greater than {MAX_PUID} characters.")
        elif not PUID_PATTERN.match(puid):
            refuse("puid", "The puid format is invalid.")
    for field, limit in (("decision_facts", MAX_FACTS), ("source_identity", MAX_SHORT)):
        _check_length(statement, field, limit, refuse)
    url = statement.get("decision_ground_reference_url")
    if not _blank(url):
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or len(url) > MAX_SHORT:
            refuse("decision_ground_reference_url", "The decision ground reference url field must be a valid URL.")
    content_id = statement.get("content_id")
    if content_id is not None and (
        not isinstance(content_id, dict)
        or set(content_id) - {"EAN-13"}
        or not EAN13.match(str(content_id.get("EAN-13", "")))
    ):
        refuse("content_id", "The content id field must hold one EAN-13 code of 13 digits.")
    return problems


def _check_length(statement: dict, field: str, limit: int, refuse) -> None:
    value = statement.get(field)
    if isinstance(value, str) and len(value) > limit:
        refuse(field, f"The {_words(field)} field must not be greater than {limit} characters.")
    elif value is not None and not isinstance(value, str):
        refuse(field, f"The {_words(field)} field must be a string.")


def _check_enumerations(statement: dict, refuse) -> None:
    single = {
        "decision_monetary": DECISION_MONETARIES,
        "decision_provision": DECISION_PROVISIONS,
        "decision_account": DECISION_ACCOUNTS,
        "account_type": ACCOUNT_TYPES,
        "decision_ground": DECISION_GROUNDS,
        "category": STATEMENT_CATEGORIES,
        "source_type": SOURCE_TYPES,
        "automated_decision": AUTOMATED_DECISIONS,
        "automated_detection": YES_NO,
        "incompatible_content_illegal": YES_NO,
        "content_language": LANGUAGES,
    }
    for field, allowed in single.items():
        value = statement.get(field)
        if not _blank(value) and (not isinstance(value, str) or value not in allowed):
            refuse(field, f"The selected {_words(field)} is invalid.")
    arrays = {
        "decision_visibility": DECISION_VISIBILITIES,
        "content_type": CONTENT_TYPES,
        "category_addition": STATEMENT_CATEGORIES,
        "category_specification": KEYWORDS,
        "territorial_scope": EU_EEA_COUNTRIES,
    }
    for field, allowed in arrays.items():
        value = statement.get(field)
        if value is None:
            continue
        if not isinstance(value, list):
            refuse(field, f"The {_words(field)} field must be an array.")
        elif any(not isinstance(item, str) or item not in allowed for item in value):
            refuse(field, f"The selected {_words(field)} is invalid.")


def _check_conditionals(statement: dict, refuse) -> None:
    for field, other in OTHER_VALUES.items():
        value = statement.get(field)
        chosen = other in value if isinstance(value, list) else value == other
        if chosen and _blank(statement.get(f"{field}_other")):
            refuse(f"{field}_other", f"The {_words(field)} other field is required.")
        _check_length(statement, f"{field}_other", MAX_SHORT, refuse)
    _check_length(statement, "category_specification_other", MAX_SHORT, refuse)
    ground = statement.get("decision_ground")
    pairs = {
        DecisionGround.ILLEGAL_CONTENT: (
            "illegal_content_legal_ground",
            "illegal_content_explanation",
            "illegal content",
        ),
        DecisionGround.INCOMPATIBLE_CONTENT: (
            "incompatible_content_ground",
            "incompatible_content_explanation",
            "incompatible content",
        ),
    }
    if ground in pairs:
        reference, explanation, words = pairs[ground]
        for field, limit in ((reference, MAX_SHORT), (explanation, MAX_EXPLANATION)):
            if _blank(statement.get(field)):
                refuse(field, f"The {_words(field)} field is required when decision ground is {words}.")
            else:
                _check_length(statement, field, limit, refuse)


def _check_dates(statement: dict, refuse) -> None:
    application = None
    for field, first in (("application_date", FIRST_APPLICATION_DATE), ("content_date", FIRST_CONTENT_DATE)):
        value = statement.get(field)
        if _blank(value):
            continue
        day = _parse_day(value)
        if day is None:
            refuse(field, f"The {_words(field)} does not match the format YYYY-MM-DD.")
        elif day < first:
            refuse(field, f"The {_words(field)} field must be a date after or equal to {first.isoformat()}.")
        elif day > LAST_DATE:
            refuse(field, f"The {_words(field)} field must be a date before or equal to {LAST_DATE.isoformat()}.")
        elif field == "application_date":
            application = day
    for field in END_DATE_FIELD.values():
        value = statement.get(field)
        if _blank(value):  # blank: indefinite
            continue
        day = _parse_day(value)
        label = "end date of " + field.removeprefix("end_date_").replace("_", " ")
        if day is None:
            refuse(field, f"The {label} does not match the format YYYY-MM-DD.")
        elif day > LAST_DATE:
            refuse(field, f"The {_words(field)} field must be a date before or equal to {LAST_DATE.isoformat()}.")
        elif application is not None and day < application:
            refuse(field, f"The {_words(field)} field must be a date after or equal to application date.")
