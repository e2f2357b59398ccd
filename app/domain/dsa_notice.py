"""The affected user's notice of a restriction: the statement of reasons of DSA
Art. 17 in the user's language (SPEC §7 DSA-4).

Rendered from the same record as the statement sent to the Transparency Database
(`DsaStatement.statement`, the API v2 body of `app.domain.dsa.build_statement`), so
the user reads what the Commission's database holds: what was restricted, the facts,
the ground and its reference, whether automated means detected the content and took
the decision, and how and until when to complain, with the right to out-of-court
dispute settlement (Art. 21) and to judicial redress.

Plain text. The templates are this module's constants; the statement's values
(facts, explanations, references, written by moderators and admins) are only ever
inserted into them, never read as a template, so braces or markup in them stay as
typed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

from app.domain import dsa
from app.domain.dsa_settings import MIN_COMPLAINT_WINDOW_DAYS, NOTICE_LANGUAGES

NOTICE_ACTION_CODE = "notify_user"  # the action a notice is delivered as (DSA-4)
LANGUAGE_NAMES = {"en": "English", "de": "German (Deutsch)"}  # the notice languages, for people

# Restriction types in German (the English words are the Transparency Database's own
# labels, `dsa.RESTRICTION_TYPES`).
RESTRICTION_WORDS_DE = {
    "DECISION_VISIBILITY_CONTENT_REMOVED": "Entfernung von Inhalten",
    "DECISION_VISIBILITY_CONTENT_DISABLED": "Sperrung des Zugangs zu Inhalten",
    "DECISION_VISIBILITY_CONTENT_DEMOTED": "Herabstufung von Inhalten",
    "DECISION_VISIBILITY_CONTENT_AGE_RESTRICTED": "Altersbeschränkung von Inhalten",
    "DECISION_VISIBILITY_CONTENT_INTERACTION_RESTRICTED": "Einschränkung der Interaktion mit Inhalten",
    "DECISION_VISIBILITY_CONTENT_LABELLED": "Kennzeichnung von Inhalten",
    "DECISION_VISIBILITY_OTHER": "Sonstige Beschränkung",
    "DECISION_MONETARY_SUSPENSION": "Aussetzung von Geldzahlungen",
    "DECISION_MONETARY_TERMINATION": "Beendigung von Geldzahlungen",
    "DECISION_MONETARY_OTHER": "Sonstige Beschränkung von Geldzahlungen",
    "DECISION_PROVISION_PARTIAL_SUSPENSION": "Teilweise Aussetzung der Bereitstellung des Dienstes",
    "DECISION_PROVISION_TOTAL_SUSPENSION": "Vollständige Aussetzung der Bereitstellung des Dienstes",
    "DECISION_PROVISION_PARTIAL_TERMINATION": "Teilweise Beendigung der Bereitstellung des Dienstes",
    "DECISION_PROVISION_TOTAL_TERMINATION": "Vollständige Beendigung der Bereitstellung des Dienstes",
    "DECISION_ACCOUNT_SUSPENDED": "Sperrung des Kontos",
    "DECISION_ACCOUNT_TERMINATED": "Kündigung des Kontos",
}

# The opening line per category: why the platform looked at the content (DSA-4).
OPENINGS = {
    "en": {
        "STATEMENT_CATEGORY_ANIMAL_WELFARE": "We acted on your content because it concerns harm to animals.",
        "STATEMENT_CATEGORY_CONSUMER_INFORMATION": (
            "We acted on your content because it infringes the rules on information owed to consumers."
        ),
        "STATEMENT_CATEGORY_CYBER_VIOLENCE": "We acted on your content because it is a form of cyber violence.",
        "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN": (
            "We acted on your content because it is a form of cyber violence against women."
        ),
        "STATEMENT_CATEGORY_DATA_PROTECTION_AND_PRIVACY_VIOLATIONS": (
            "We acted on your content because it violates data protection or someone's privacy."
        ),
        "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH": (
            "We acted on your content because it is illegal or harmful speech."
        ),
        "STATEMENT_CATEGORY_INTELLECTUAL_PROPERTY_INFRINGEMENTS": (
            "We acted on your content because it infringes intellectual property rights."
        ),
        "STATEMENT_CATEGORY_NEGATIVE_EFFECTS_ON_CIVIC_DISCOURSE_OR_ELECTIONS": (
            "We acted on your content because of its negative effects on civic discourse or elections."
        ),
        "STATEMENT_CATEGORY_NOT_SPECIFIED_NOTICE": (
            "We acted on your content after a notice that it is illegal."
        ),
        "STATEMENT_CATEGORY_OTHER_VIOLATION_TC": (
            "We acted on your content because it violates our terms and conditions."
        ),
        "STATEMENT_CATEGORY_PROTECTION_OF_MINORS": "We acted on your content to protect minors.",
        "STATEMENT_CATEGORY_RISK_FOR_PUBLIC_SECURITY": (
            "We acted on your content because it is a risk for public security."
        ),
        "STATEMENT_CATEGORY_SCAMS_AND_FRAUD": "We acted on your content or account because of scams or fraud.",
        "STATEMENT_CATEGORY_SELF_HARM": "We acted on your content because it concerns self-harm.",
        "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS": (
            "We acted on your content because it offers unsafe, non-compliant or prohibited products."
        ),
        "STATEMENT_CATEGORY_VIOLENCE": "We acted on your content because it concerns violence.",
    },
    "de": {
        "STATEMENT_CATEGORY_ANIMAL_WELFARE": "Wir sind gegen Ihre Inhalte vorgegangen, weil sie Tieren schaden.",
        "STATEMENT_CATEGORY_CONSUMER_INFORMATION": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie gegen Informationspflichten gegenüber "
            "Verbrauchern verstoßen."
        ),
        "STATEMENT_CATEGORY_CYBER_VIOLENCE": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie eine Form digitaler Gewalt sind."
        ),
        "STATEMENT_CATEGORY_CYBER_VIOLENCE_AGAINST_WOMEN": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie eine Form digitaler Gewalt gegen Frauen sind."
        ),
        "STATEMENT_CATEGORY_DATA_PROTECTION_AND_PRIVACY_VIOLATIONS": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie den Datenschutz oder die Privatsphäre verletzen."
        ),
        "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil es sich um rechtswidrige oder schädliche Äußerungen "
            "handelt."
        ),
        "STATEMENT_CATEGORY_INTELLECTUAL_PROPERTY_INFRINGEMENTS": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie geistige Eigentumsrechte verletzen."
        ),
        "STATEMENT_CATEGORY_NEGATIVE_EFFECTS_ON_CIVIC_DISCOURSE_OR_ELECTIONS": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie den gesellschaftlichen Diskurs oder Wahlen "
            "beeinträchtigen."
        ),
        "STATEMENT_CATEGORY_NOT_SPECIFIED_NOTICE": (
            "Wir sind gegen Ihre Inhalte nach einer Meldung vorgegangen, dass sie rechtswidrig sind."
        ),
        "STATEMENT_CATEGORY_OTHER_VIOLATION_TC": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie gegen unsere Nutzungsbedingungen verstoßen."
        ),
        "STATEMENT_CATEGORY_PROTECTION_OF_MINORS": (
            "Wir sind gegen Ihre Inhalte zum Schutz von Minderjährigen vorgegangen."
        ),
        "STATEMENT_CATEGORY_RISK_FOR_PUBLIC_SECURITY": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie die öffentliche Sicherheit gefährden."
        ),
        "STATEMENT_CATEGORY_SCAMS_AND_FRAUD": (
            "Wir sind gegen Ihre Inhalte oder Ihr Konto wegen Betrugs vorgegangen."
        ),
        "STATEMENT_CATEGORY_SELF_HARM": "Wir sind gegen Ihre Inhalte vorgegangen, weil sie Selbstverletzung betreffen.",
        "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS": (
            "Wir sind gegen Ihre Inhalte vorgegangen, weil sie unsichere, nicht konforme oder verbotene Produkte "
            "anbieten."
        ),
        "STATEMENT_CATEGORY_VIOLENCE": "Wir sind gegen Ihre Inhalte vorgegangen, weil sie Gewalt betreffen.",
    },
}
DEFAULT_OPENING = {
    "en": "We acted on your content or account.",
    "de": "Wir sind gegen Ihre Inhalte oder Ihr Konto vorgegangen.",
}

# The rest of the notice; each value is one of this module's strings, filled with
# str.format from the statement's values (never the other way round).
WORDS = {
    "en": {
        "subject": "Statement of reasons: {restriction}",
        "restriction": "What we did: {restriction}.",
        "until": "It applies until {day}.",
        "indefinite": "It applies until further notice.",
        "applied": "Applied on: {day}.",
        "facts": "The facts and circumstances we relied on:",
        "ground_illegal": "Ground: the content is illegal under {reference}.",
        "ground_incompatible": "Ground: the content is incompatible with our terms and conditions, {reference}.",
        "reference_url": "You can read it here: {url}",
        "explanation": "Why it falls under this ground:",
        "detection_yes": "Automated means were used to detect the content.",
        "detection_no": "No automated means were used to detect the content.",
        "decision": {
            dsa.AutomatedDecision.FULLY: "The decision was taken by automated means alone.",
            dsa.AutomatedDecision.PARTIALLY: "The decision was taken partly by automated means, with a person.",
            dsa.AutomatedDecision.NOT_AUTOMATED: "The decision was taken by a person, without automated means.",
        },
        "complain": (
            "How to complain: you can contest this decision through our internal complaint-handling system "
            "(reply to this notice or use the appeal option in your account), free of charge, until {day} "
            "(at least six months after the decision). Quote the reference {puid}."
        ),
        "redress": (
            "You may also refer the dispute to a certified out-of-court dispute settlement body (Article 21 of the "
            "Digital Services Act) and you have the right to seek redress before the courts."
        ),
        "reference_line": "Reference: {puid}",
    },
    "de": {
        "subject": "Begründung unserer Entscheidung: {restriction}",
        "restriction": "Unsere Maßnahme: {restriction}.",
        "until": "Sie gilt bis zum {day}.",
        "indefinite": "Sie gilt bis auf Weiteres.",
        "applied": "Umgesetzt am: {day}.",
        "facts": "Die Tatsachen und Umstände, auf die wir uns stützen:",
        "ground_illegal": "Grund: Der Inhalt ist rechtswidrig nach {reference}.",
        "ground_incompatible": "Grund: Der Inhalt ist mit unseren Nutzungsbedingungen unvereinbar, {reference}.",
        "reference_url": "Nachzulesen unter: {url}",
        "explanation": "Warum dieser Grund zutrifft:",
        "detection_yes": "Der Inhalt wurde mit automatisierten Mitteln erkannt.",
        "detection_no": "Der Inhalt wurde ohne automatisierte Mittel erkannt.",
        "decision": {
            dsa.AutomatedDecision.FULLY: "Die Entscheidung wurde ausschließlich mit automatisierten Mitteln getroffen.",
            dsa.AutomatedDecision.PARTIALLY: (
                "Die Entscheidung wurde teilweise mit automatisierten Mitteln getroffen, unter Beteiligung eines "
                "Menschen."
            ),
            dsa.AutomatedDecision.NOT_AUTOMATED: (
                "Die Entscheidung wurde von einem Menschen ohne automatisierte Mittel getroffen."
            ),
        },
        "complain": (
            "Beschwerde: Sie können diese Entscheidung über unser internes Beschwerdemanagementsystem kostenlos "
            "anfechten (antworten Sie auf diese Mitteilung oder nutzen Sie die Einspruchsfunktion in Ihrem Konto), "
            "bis zum {day} (mindestens sechs Monate nach der Entscheidung). Geben Sie die Referenz {puid} an."
        ),
        "redress": (
            "Sie können die Streitigkeit außerdem einer zertifizierten außergerichtlichen Streitbeilegungsstelle "
            "vorlegen (Artikel 21 des Gesetzes über digitale Dienste) und haben das Recht auf einen gerichtlichen "
            "Rechtsbehelf."
        ),
        "reference_line": "Referenz: {puid}",
    },
}


def notice_language(requested: str | None, languages: Iterable[str] = NOTICE_LANGUAGES, default: str = "en") -> str:
    """The language a notice is written in (DSA-4): the user's when a template exists
    and the settings offer it, else the settings' default.

    Args:
        requested: the affected user's language, ISO 639-1 in any case (``de``,
            ``DE``) or None when unknown.
        languages: the settings' ``notice_languages``.
        default: the settings' ``default_language`` (English when it has no template).
    """
    offered = [code for code in languages if code in WORDS]
    wanted = (requested or "").strip().lower()
    if wanted in offered:
        return wanted
    return default if default in WORDS else "en"


def restriction_words(statement: dict[str, Any], language: str) -> str:
    """What was restricted, in words (DSA-4): each ``decision_*`` value of the
    statement in `language`, with its ``*_other`` text for an OTHER type, joined."""
    values: list[str] = []
    for field in dsa.DECISION_FIELD.values():
        value = statement.get(field)
        values.extend(value if isinstance(value, list) else [value] if value else [])
    words = []
    for value in values:
        english = _english_words(value)
        word = RESTRICTION_WORDS_DE.get(value, english) if language == "de" else english
        if value.endswith("_OTHER"):
            other = statement.get("decision_visibility_other") or statement.get("decision_monetary_other")
            word = f"{word} ({other})" if other else word
        words.append(word)
    return "; ".join(words) or DEFAULT_OPENING[language]


def _english_words(value: str) -> str:
    for types in dsa.RESTRICTION_TYPES.values():
        if value in types:
            return types[value].replace(" (please specify)", "")
    return value


def complaint_deadline(complaint_until: datetime | date, application_date: str | None) -> date:
    """The last day a complaint is taken (DSA-4, Art. 20(1)): `complaint_until`, and
    never less than six months (`MIN_COMPLAINT_WINDOW_DAYS`) after the restriction
    applied, whatever a record says.

    Args:
        complaint_until: the statement row's ``complaint_until`` (UTC).
        application_date: the statement's ``application_date`` (``YYYY-MM-DD``) or None.
    """
    day = complaint_until.date() if isinstance(complaint_until, datetime) else complaint_until
    try:
        applied = date.fromisoformat(application_date) if application_date else None
    except ValueError:
        applied = None
    if applied is not None:
        day = max(day, applied + timedelta(days=MIN_COMPLAINT_WINDOW_DAYS))
    return day


def render_notice(
    statement: dict[str, Any],
    language: str | None,
    complaint_until: datetime | date,
    *,
    languages: Iterable[str] = NOTICE_LANGUAGES,
    default_language: str = "en",
) -> dict[str, str]:
    """The affected user's notice of one restriction (DSA-4).

    Args:
        statement: the statement of reasons (API v2 body, `DsaStatement.statement`).
        language: the user's language (ISO 639-1) or None; one without a template,
            or not in `languages`, gives `default_language`.
        complaint_until: the end of the complaint window (UTC datetime or date);
            shown as an ISO date, never earlier than six months after application.
        languages: the settings' ``notice_languages``.
        default_language: the settings' ``default_language``.

    Returns:
        ``{"language", "subject", "text"}``: plain text, values inserted as written.
    """
    lang = notice_language(language, languages, default_language)
    w = WORDS[lang]
    restriction = restriction_words(statement, lang)
    puid = str(statement.get("puid") or "")
    lines = [OPENINGS[lang].get(statement.get("category") or "", DEFAULT_OPENING[lang]), ""]
    lines.append(w["restriction"].format(restriction=restriction))
    if statement.get("application_date"):
        lines.append(w["applied"].format(day=statement["application_date"]))
    ends = [statement.get(field) for field in dsa.END_DATE_FIELD.values() if statement.get(field)]
    lines.append(w["until"].format(day=min(ends)) if ends else w["indefinite"])
    lines += ["", w["facts"], str(statement.get("decision_facts") or ""), ""]
    lines += _ground_lines(statement, w)
    detected = statement.get("automated_detection") == "Yes"
    lines.append(w["detection_yes"] if detected else w["detection_no"])
    decision = _decision(statement.get("automated_decision"))
    lines += [w["decision"][decision], ""]
    deadline = complaint_deadline(complaint_until, statement.get("application_date"))
    lines += [w["complain"].format(day=deadline.isoformat(), puid=puid), "", w["redress"], ""]
    lines.append(w["reference_line"].format(puid=puid))
    return {"language": lang, "subject": w["subject"].format(restriction=restriction), "text": "\n".join(lines)}


def _decision(value: Any) -> dsa.AutomatedDecision:
    try:
        return dsa.AutomatedDecision(value)
    except ValueError:
        return dsa.AutomatedDecision.NOT_AUTOMATED


def _ground_lines(statement: dict[str, Any], w: dict[str, Any]) -> list[str]:
    """The ground, its reference (and URL) and the explanation."""
    if statement.get("decision_ground") == dsa.DecisionGround.ILLEGAL_CONTENT:
        reference = statement.get("illegal_content_legal_ground") or ""
        explanation = statement.get("illegal_content_explanation") or ""
        lines = [w["ground_illegal"].format(reference=reference)]
    else:
        reference = statement.get("incompatible_content_ground") or ""
        explanation = statement.get("incompatible_content_explanation") or ""
        lines = [w["ground_incompatible"].format(reference=reference)]
    if statement.get("decision_ground_reference_url"):
        lines.append(w["reference_url"].format(url=statement["decision_ground_reference_url"]))
    if explanation:
        lines += [w["explanation"], str(explanation)]
    return [*lines, ""]
