"""The demo installation's DSA settings (SPEC §7 DSA-1): the takedown removes content,
the suspension suspends the account; both decision codes are incompatible with the
demo platform's terms. Tests and `flask demo` put this document in force."""

from __future__ import annotations

DEMO_TERMS_URL = "https://platform.example/terms"

DEMO_DSA_SETTINGS = {
    "enabled": True,
    "restrictions": {
        "takedown": {"restriction": "visibility", "type": "DECISION_VISIBILITY_CONTENT_REMOVED", "other": None},
        "suspend_account": {"restriction": "account", "type": "DECISION_ACCOUNT_SUSPENDED", "other": None},
    },
    "decisions": {
        "remove_content": {
            "category": "STATEMENT_CATEGORY_ILLEGAL_OR_HARMFUL_SPEECH",
            "ground": "DECISION_GROUND_INCOMPATIBLE_CONTENT",
            "reference": "Community guidelines, section 3 (harassment)",
            "reference_url": DEMO_TERMS_URL + "#harassment",
            "keywords": ["KEYWORD_CYBER_HARASSMENT"],
            "illegal": False,
        },
        "suspend_account": {
            "category": "STATEMENT_CATEGORY_SCAMS_AND_FRAUD",
            "ground": "DECISION_GROUND_INCOMPATIBLE_CONTENT",
            "reference": "Terms of service, section 7 (inauthentic behaviour)",
            "reference_url": DEMO_TERMS_URL + "#inauthentic",
            "keywords": [],
            "illegal": None,
        },
    },
    "content_types": {"post": ["CONTENT_TYPE_TEXT"], "author_of": ["CONTENT_TYPE_OTHER"]},
    "territorial_scope": ["AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GR", "HR", "HU", "IE",
                          "IT", "LT", "LU", "LV", "MT", "NL", "PL", "PT", "RO", "SE", "SI", "SK"],
    "complaint_window_days": 183,
    "notice_component": "notify_user",
    "notice_languages": ["en", "de"],
    "default_language": "en",
    "tdb_connection": None,
}
