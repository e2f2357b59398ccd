"""The platform's evidence about a reported target (SPEC REV-1).

A report's target may carry what the platform showed its user: the content text, the
author's account, media (links with their SHA-256 and MIME type, never fetched by the
console), a permalink and when it was posted. `parse_evidence` checks it against the
documented limits; `evidence_digest` fingerprints it, so the evidence a reviewer saw
can be named exactly and a re-sent report with different evidence is recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .clock import iso
from .digests import json_digest
from .text_safety import reference_problem

# Documented limits (docs/platforms.md, OpenAPI): beyond any of them intake answers 400.
MAX_CONTENT_TEXT = 10_000
MAX_REFERENCE = 500
MAX_AUTHOR_NAME = 200
MAX_URL = 2_000
MAX_MEDIA = 10
MAX_MIME_TYPE = 100

EVIDENCE_FIELDS = frozenset(
    {"content_text", "author_reference", "author_name", "media", "permalink", "posted_at", "language"}
)
MEDIA_FIELDS = frozenset({"url", "sha256", "mime_type"})
REFERENCE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,50}:[^\s]{1,440}")
SHA256_PATTERN = re.compile(r"[a-f0-9]{64}")
MIME_PATTERN = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")
URL_PATTERN = re.compile(r"https?://[^\s/?#]+[^\s]*", re.IGNORECASE)
# ISO-8601 in UTC: ...Z or ...+00:00, seconds required, fractions optional.
POSTED_AT_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|\+00:00)", re.ASCII)


class EvidenceInvalid(ValueError):
    """Evidence outside the contract; `field` names the JSON path at fault, `code` the
    error code (``report_evidence_invalid``; ``reference_characters`` and
    ``url_userinfo`` for FOUR-10)."""

    def __init__(self, field: str, message: str, code: str = "report_evidence_invalid") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Media:
    url: str
    sha256: str
    mime_type: str


@dataclass(frozen=True)
class Evidence:
    """Validated evidence for one target; every field is optional."""

    content_text: str | None = None
    author_reference: str | None = None
    author_name: str | None = None
    media: tuple[Media, ...] = ()
    permalink: str | None = None
    posted_at: datetime | None = None
    language: str | None = None  # ISO 639-1, lower case (DSA-2 content language, DSA-4 notice)

    def material(self, target_reference: str) -> dict[str, Any]:
        """What the digest covers: the target and every field as stored. The language
        is covered when sent (evidence stored before it existed keeps its digest)."""
        material = {
            "schema_version": "1",
            "target_reference": target_reference,
            "content_text": self.content_text,
            "author_reference": self.author_reference,
            "author_name": self.author_name,
            "media": [{"url": m.url, "sha256": m.sha256, "mime_type": m.mime_type} for m in self.media],
            "permalink": self.permalink,
            "posted_at": iso(self.posted_at),
        }
        if self.language is not None:
            material["language"] = self.language
        return material


def _text(value: Any, field: str, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise EvidenceInvalid(field, f"{field} must be text of at most {limit:,} characters.")
    return value


def _url(value: Any, field: str) -> str | None:
    text = _text(value, field, MAX_URL)
    if text is not None and not URL_PATTERN.fullmatch(text):
        raise EvidenceInvalid(field, f"{field} must be an http or https URL of at most {MAX_URL:,} characters.")
    if text is not None and ("@" in link_authority(text) or "\\" in link_authority(text)):
        # FOUR-10: https://platform.example@evil.example/ reads as the platform, opens evil.example
        raise EvidenceInvalid(
            field,
            f"{field} must not carry a user name or password before its host (user@host): "
            "the link would read as one host and open another.",
            "url_userinfo",
        )
    return text


def link_authority(url: str) -> str:
    """What follows ``scheme://`` up to the first ``/``, ``?`` or ``#`` (SPEC FOUR-10).

    Args:
        url: an http(s) URL as received.

    Returns:
        The authority as written: host and port, and any userinfo (``user@``).
    """
    rest = url.split("//", 1)[1] if "//" in url else url
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


def link_host(url: str) -> str:
    """The host a link opens, for the page to show beside it (SPEC FOUR-10).

    Args:
        url: an http(s) URL accepted at intake (no userinfo).

    Returns:
        The lower-cased host (no port), e.g. ``platform.example``; a host with non-ASCII
        characters in its DNS form (``xn--...``), so a lookalike host cannot pass for
        another; ``""`` when none.
    """
    host = link_authority(url).rsplit("@", 1)[-1]
    if host.startswith("["):  # an IPv6 literal keeps its brackets
        return host.split("]", 1)[0].lower() + "]"
    host = host.split(":", 1)[0].lower()
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:  # not a valid name: show its characters escaped
        return host.encode("ascii", "backslashreplace").decode("ascii")


def _reference(value: Any, field: str) -> str | None:
    text = _text(value, field, MAX_REFERENCE)
    problem = text is not None and reference_problem(text, field)
    if problem:  # FOUR-10
        raise EvidenceInvalid(field, problem, "reference_characters")
    if text is not None and not REFERENCE_PATTERN.fullmatch(text):
        raise EvidenceInvalid(field, f"{field} must be an account reference like 'user:42'.")
    return text


def _posted_at(value: Any, field: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str) or not POSTED_AT_PATTERN.fullmatch(value):
        raise EvidenceInvalid(field, f"{field} must be ISO-8601 UTC, e.g. 2026-11-30T08:15:00Z.")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError as error:  # e.g. month 13
        raise EvidenceInvalid(field, f"{field} is not a real date and time.") from error


def _language(value: Any, field: str) -> str | None:
    """An ISO 639-1 code (either case), stored in lower case (DSA-2)."""
    from .dsa import LANGUAGES

    if value is None:
        return None
    if not isinstance(value, str) or value.upper() not in LANGUAGES:
        raise EvidenceInvalid(field, f"{field} must be an ISO 639-1 language code, e.g. en or de.")
    return value.lower()


def _media(value: Any, field: str) -> tuple[Media, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_MEDIA:
        raise EvidenceInvalid(field, f"{field} must list at most {MAX_MEDIA} media references.")
    items = []
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(item, dict) or set(item) - MEDIA_FIELDS or not set(item) >= MEDIA_FIELDS:
            raise EvidenceInvalid(where, f"{where} needs exactly url, sha256 and mime_type.")
        if item["url"] is None:  # the media fields are required: null is not a URL
            raise EvidenceInvalid(f"{where}.url", f"{where}.url must be an http or https URL.")
        url = _url(item["url"], f"{where}.url")
        sha256 = item["sha256"]
        if not isinstance(sha256, str) or not SHA256_PATTERN.fullmatch(sha256):
            raise EvidenceInvalid(f"{where}.sha256", f"{where}.sha256 must be 64 lowercase hex digits.")
        mime_type = item["mime_type"]
        if not isinstance(mime_type, str) or len(mime_type) > MAX_MIME_TYPE or not MIME_PATTERN.fullmatch(mime_type):
            raise EvidenceInvalid(f"{where}.mime_type", f"{where}.mime_type must be a MIME type like image/jpeg.")
        items.append(Media(url, sha256, mime_type))
    return tuple(items)


def parse_evidence(value: Any, field: str = "evidence") -> Evidence:
    """Check a target's evidence against the documented limits (REV-1).

    Args:
        value: the decoded JSON object ``{content_text?, author_reference?,
            author_name?, media?: [{url, sha256, mime_type}], permalink?,
            posted_at? (ISO-8601 UTC), language? (ISO 639-1)}``.
        field: the JSON path of `value`, for error messages (``targets[0].evidence``).

    Returns:
        The validated `Evidence`.

    Raises:
        EvidenceInvalid: an unknown field, a value of the wrong type, or one beyond
            its limit (content text 10,000 characters, references 500, URLs 2,000,
            10 media references).
    """
    if not isinstance(value, dict):
        raise EvidenceInvalid(field, f"{field} must be a JSON object.")
    unknown = sorted(set(value) - EVIDENCE_FIELDS)
    if unknown:
        raise EvidenceInvalid(f"{field}.{unknown[0]}", f"Unknown evidence field: {unknown[0]}.")
    empty = sorted(key for key, item in value.items() if item is None)
    if empty:  # leave a field out rather than sending null
        raise EvidenceInvalid(f"{field}.{empty[0]}", f"{field}.{empty[0]} is null; leave it out instead.")
    return Evidence(
        content_text=_text(value.get("content_text"), f"{field}.content_text", MAX_CONTENT_TEXT),
        author_reference=_reference(value.get("author_reference"), f"{field}.author_reference"),
        author_name=_text(value.get("author_name"), f"{field}.author_name", MAX_AUTHOR_NAME),
        media=_media(value.get("media"), f"{field}.media"),
        permalink=_url(value.get("permalink"), f"{field}.permalink"),
        posted_at=_posted_at(value.get("posted_at"), f"{field}.posted_at"),
        language=_language(value.get("language"), f"{field}.language"),
    )


def evidence_digest(evidence: Evidence, target_reference: str) -> str:
    """``sha256:`` digest of the evidence's RFC 8785 canonical JSON (REV-1)."""
    return json_digest(evidence.material(target_reference))
