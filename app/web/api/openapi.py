"""The OpenAPI 3.1 document of the platform API: its request schemas are the contract
the API checks bodies against (`app.web.api.contract`)."""

from __future__ import annotations

from app.domain.dsa_facts import REPORT_SOURCES

# A schema keyword of ours: the string is a reference, refused with an invisible,
# bidirectional or lookalike character (400 reference_characters, FOUR-10).
REFERENCE = "x-reference"


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


ERRORS = {
    "400": _error(
        "Invalid request (error codes: invalid_json, action_result_invalid, report_invalid,"
        " report_evidence_invalid, reference_characters, url_userinfo, ...)."
    ),
    "401": _error("Missing or wrong bearer token (unauthorized)."),
    "404": _error(
        "Not found or not this integration's (action_result_unavailable, queue_not_found, report_not_found,"
        " appeal_not_found)."
    ),
    "409": _error(
        "Conflict with the action's state (action_result_identity_mismatch, action_result_terminal,"
        " action_result_conflict), or an appeal that cannot be filed (report_not_appealable,"
        " appeal_window_closed: after the decision's complaint window, DSA-5)."
    ),
    "413": _error("Body too large (request_too_large)."),
    "415": _error("Not JSON (unsupported_media_type)."),
}


def evidence_schema() -> dict:
    """What a platform may send about a reported target (SPEC REV-1), with its limits."""
    from app.domain import evidence as e

    url = {
        "type": "string",
        "maxLength": e.MAX_URL,
        "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#@\\\\]+([/?#][^\\s]*)?$",
        "description": "http(s); no user name or password before the host (FOUR-10: url_userinfo).",
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "description": (
            "Stored once with a digest and never changed; shown escaped to reviewers. Media are shown as links"
            " with their hash and never loaded by the console."
        ),
        "properties": {
            "content_text": {"type": ["string", "null"], "maxLength": e.MAX_CONTENT_TEXT},
            "author_reference": {
                "type": ["string", "null"],
                "maxLength": e.MAX_REFERENCE,
                "pattern": "^[A-Za-z0-9_.-]{1,50}:[^\\s]{1,440}$",
                "description": "The author's account, e.g. user:42.",
                REFERENCE: True,
            },
            "author_name": {"type": ["string", "null"], "maxLength": e.MAX_AUTHOR_NAME},
            "media": {
                "type": ["array", "null"],
                "maxItems": e.MAX_MEDIA,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["url", "sha256", "mime_type"],
                    "properties": {
                        "url": url,
                        "sha256": {"type": "string", "pattern": "^[a-f0-9]{64}$"},
                        "mime_type": {
                            "type": "string",
                            "maxLength": e.MAX_MIME_TYPE,
                            "pattern": "^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$",
                        },
                    },
                },
            },
            "permalink": {**url, "type": ["string", "null"]},
            "posted_at": {
                "type": ["string", "null"],
                "format": "date-time",
                "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?(Z|\\+00:00)$",
                "description": "ISO-8601 UTC.",
            },
            "language": {
                "type": "string",
                "pattern": "^[A-Za-z]{2}$",
                "description": (
                    "The content's language, ISO 639-1 (e.g. en, de): the statement of reasons' content language"
                    " and the notice's language (DSA-2, DSA-4)."
                ),
            },
        },
    }


def openapi_document() -> dict:
    digest = {"type": "string", "pattern": "^sha256:[a-f0-9]{64}$"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Action console platform API",
            "version": "1.0.0",
            "description": (
                "Platforms send reports and asynchronous action results. Authenticate with an integration bearer token."
            ),
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                                "field": {"type": "string"},
                            },
                        }
                    },
                },
                "ActionResult": {
                    "type": "object",
                    "description": "Fields not listed here are ignored.",
                    "required": ["action_id", "status", "operation_id", "payload_digest"],
                    "properties": {
                        "action_id": {"type": "string", "minLength": 1, "maxLength": 500},
                        "status": {"type": "string", "enum": ["applied", "failed"]},
                        "operation_id": {"type": "string", "maxLength": 700},
                        "payload_digest": digest,
                        "terminal": {"type": ["boolean", "null"], "description": "null: not sent."},
                        "retry_after_seconds": {"type": "integer", "minimum": 1, "maximum": 21600},
                        "error_code": {"type": ["string", "null"], "pattern": "^[A-Za-z0-9_.:-]{1,200}$"},
                        "provider_request_id": {"type": ["string", "null"], "maxLength": 500},
                    },
                },
                "ActionResultAnswer": {
                    "type": "object",
                    "required": ["action_id", "state", "idempotent_replay"],
                    "properties": {
                        "action_id": {"type": "string"},
                        "state": {"type": "string"},
                        "idempotent_replay": {"type": "boolean"},
                    },
                },
                "ReportIntake": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["external_id", "targets"],
                    "properties": {
                        "external_id": {"type": "string", "minLength": 1, "maxLength": 200, REFERENCE: True},
                        "queue": {"type": ["string", "null"], "maxLength": 100},
                        "category": {"type": ["string", "null"], "maxLength": 100},
                        "reason": {
                            "type": ["string", "null"],
                            "maxLength": 100,
                            "description": "The reporter's reason, e.g. spam; the queue filters by it (QUEUE-1).",
                        },
                        "summary": {"type": ["string", "null"], "maxLength": 5000},
                        "policy_version_id": {"type": ["string", "null"], "maxLength": 200},
                        "source": {
                            "enum": [*REPORT_SOURCES, None],
                            "description": (
                                "Where the report came from, for the statement of reasons (DSA-2): trusted_flagger,"
                                " other_notification (e.g. an authority's order) or automated_detection (the"
                                " platform's own); left out or null: a user's notice under Article 16 DSA."
                            ),
                        },
                        "targets": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 50,
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["reference"],
                                "properties": {
                                    "reference": {
                                        "type": "string",
                                        "pattern": "^[A-Za-z0-9_.-]{1,50}:[^\\s]{1,440}$",
                                        REFERENCE: True,
                                    },
                                    "kind": {"type": "string", "minLength": 1, "maxLength": 50},
                                    "evidence": {"$ref": "#/components/schemas/Evidence"},
                                },
                            },
                        },
                    },
                },
                "Evidence": evidence_schema(),
                "ReportAnswer": {
                    "type": "object",
                    "required": ["report_id", "public_reference", "created", "evidence_digests", "evidence_mismatch"],
                    "properties": {
                        "report_id": {"type": "string"},
                        "public_reference": {"type": "string"},
                        "created": {"type": "boolean"},
                        "evidence_digests": {
                            "type": "array",
                            "description": "The stored evidence's digest per target, in order (null: none).",
                            "items": {"oneOf": [digest, {"type": "null"}]},
                        },
                        "evidence_mismatch": {
                            "type": "boolean",
                            "description": (
                                "A repeat of a received report carried other evidence. Evidence is stored once"
                                " and never changed: the first received is kept."
                            ),
                        },
                        "notice": {"type": "string"},
                    },
                },
                "AppealStatus": {
                    "type": "object",
                    "required": ["appeal_id", "state", "outcome", "outcome_notice"],
                    "properties": {
                        "appeal_id": {"type": "string"},
                        "created": {"type": "boolean", "description": "Only in the answer to filing it."},
                        "external_id": {"type": ["string", "null"]},
                        "report_reference": {"type": "string"},
                        "state": {"type": "string", "enum": ["open", "decided"]},
                        "outcome": {"type": ["string", "null"], "enum": ["upheld", "modified", "reversed", None]},
                        "decided_at": {"type": ["string", "null"], "description": "ISO-8601 UTC."},
                        "outcome_notice": {
                            "description": (
                                "The notice to give the complainant once decided (DSA Art. 20, 21; SPEC DSA-5):"
                                " the outcome, the reason, and the referral to a certified out-of-court dispute"
                                " settlement body and to a court. Plain text. Null while open or when the"
                                " installation makes no DSA statements."
                            ),
                            "oneOf": [
                                {"type": "null"},
                                {
                                    "type": "object",
                                    "required": ["language", "text"],
                                    "properties": {
                                        "language": {"type": "string", "description": "ISO 639-1, e.g. en, de."},
                                        "text": {"type": "string"},
                                    },
                                },
                            ],
                        },
                    },
                },
                "ActionStatus": {
                    "type": "object",
                    "required": ["action_id", "state"],
                    "properties": {
                        "action_id": {"type": "string"},
                        "operation_id": {"type": "string"},
                        "payload_digest": {"type": "string"},
                        "action_code": {"type": "string"},
                        "state": {"type": "string"},
                        "delivery_cycle": {"type": "integer"},
                        "delivery_terminal": {"type": "boolean"},
                        "last_error_code": {"type": ["string", "null"]},
                    },
                },
            },
        },
        "paths": {
            "/action-results": {
                "post": {
                    "operationId": "postActionResult",
                    "summary": "Report the result of an action received earlier",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ActionResult"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "Recorded, or a replay of the recorded result",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/ActionResultAnswer"}}
                            },
                        },
                        **ERRORS,
                        "403": _error(
                            "The bearer token stands only since after the action was first sent (its creation,"
                            " or what it was approved to succeed), so it cannot report its result"
                            " (result_token_too_new, FOUR-8)."
                        ),
                    },
                }
            },
            "/reports": {
                "post": {
                    "operationId": "postReport",
                    "summary": "Send a report (idempotent by external_id)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReportIntake"}}},
                    },
                    "responses": {
                        "201": {
                            "description": "Created",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReportAnswer"}}},
                        },
                        "200": {
                            "description": "Already received",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReportAnswer"}}},
                        },
                        **ERRORS,
                    },
                }
            },
            "/appeals": {
                "post": {
                    "operationId": "postAppeal",
                    "summary": "File a user's appeal against a report's latest decision",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["report_external_id"],
                                    "properties": {
                                        "report_external_id": {"type": "string", "minLength": 1, "maxLength": 200},
                                        "external_id": {
                                            "type": ["string", "null"],
                                            "minLength": 1,
                                            "maxLength": 200,
                                            REFERENCE: True,
                                        },
                                        "statement": {"type": ["string", "null"], "maxLength": 5000},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "201": {
                            "description": "Filed",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AppealStatus"}}},
                        },
                        "200": {
                            "description": "Already filed (same external_id): the appeal as it is now",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AppealStatus"}}},
                        },
                        **ERRORS,
                    },
                }
            },
            "/appeals/{appeal_id}": {
                "get": {
                    "operationId": "getAppeal",
                    "summary": "One of your appeals: its state, outcome and outcome notice (DSA-5)",
                    "parameters": [
                        {
                            "name": "appeal_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "maxLength": 200},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "The appeal",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AppealStatus"}}},
                        },
                        "401": ERRORS["401"],
                        "404": ERRORS["404"],
                    },
                }
            },
            "/actions/{action_id}": {
                "get": {
                    "operationId": "getAction",
                    "summary": "The state of one of your actions",
                    "parameters": [
                        {
                            "name": "action_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "maxLength": 700},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "The action",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ActionStatus"}}},
                        },
                        "401": ERRORS["401"],
                        "404": ERRORS["404"],
                    },
                }
            },
        },
    }
