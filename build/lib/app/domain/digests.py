"""Canonical JSON and digests (SPEC ID-2, RCPT-3, AUD-1).

Every canonical JSON in the product goes through `canonical_json`, which is RFC 8785
(JCS) by the maintained `rfc8785` library, so a digest computed here matches one
computed by a platform with any other JCS implementation.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785


def canonical_json(value: Any) -> str:
    """Return the RFC 8785 canonical JSON text of a JSON-compatible value.

    Values made only of objects with string keys below U+D800, lists, strings,
    booleans, null and integers within ±(2^53 - 1) (what proposals hold) take the
    C JSON encoder, whose output is then RFC 8785's: keys sorted by code point
    equal UTF-16 order below U+D800, strings are escaped alike (short escapes,
    ``\\u00xx`` for other control characters, nothing else), integers print as
    their digits. Anything else (floats, other keys, tuples) goes through
    `rfc8785`; tests/domain/test_digests.py checks the two agree (a batch digests
    10,000 payloads, BULK-3).

    Raises:
        rfc8785.CanonicalizationError: for values JSON cannot hold (NaN, big ints,
            unpaired surrogates).
    """
    if _plain(value):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # an unpaired surrogate: rfc8785 refuses it
            pass
        else:
            return text
    return rfc8785.dumps(value).decode("utf-8")


_SAFE_INTEGER = 2**53 - 1


def _plain(value: Any) -> bool:
    """Whether `value` is in the subset `canonical_json` encodes with `json.dumps`."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is int:
            if -_SAFE_INTEGER <= item <= _SAFE_INTEGER:
                continue
            return False
        if kind is dict:
            for key in item:
                if type(key) is not str or not (key.isascii() or max(key) < "\ud800"):
                    return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        else:
            return False
    return True


def sha256_hex(text: str | bytes) -> str:
    """Hex SHA-256 of text (UTF-8) or bytes."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def sha256_digest(text: str | bytes) -> str:
    """``sha256:`` + hex SHA-256, the product's digest notation."""
    return f"sha256:{sha256_hex(text)}"


def json_digest(value: Any) -> str:
    """Digest of a value's canonical JSON."""
    return sha256_digest(canonical_json(value))


def payload_digest(material: dict[str, Any]) -> str:
    """The proposal's payload digest over its digest material (SPEC ID-2).

    Args:
        material: {schema_version "1", action_id, action_code, target, payload,
            preconditions, component_version_id, workflow_version_id,
            policy_version_id, expires_at (ISO-8601 UTC), installation_id}; a
            compensation carries compensates_proposal_id instead of the workflow
            fields (COMP-2).
    """
    return json_digest(material)


MAX_JSON_DEPTH = 32


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate
        return False
    return True


def json_problem(value: Any, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a decoded JSON value cannot be stored and digested, or None.

    Refuses nesting deeper than `max_depth`, NUL characters and lone surrogates in
    strings (the database refuses them), and what RFC 8785 cannot represent (NaN,
    infinities, integers beyond 2^53).
    """
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and ("\x00" in item or not _encodable(item)):
            return "a string holds a NUL or an unpaired surrogate"
    try:
        canonical_json(value)
    except (rfc8785.CanonicalizationError, ValueError, OverflowError, RecursionError) as error:
        return f"not representable as canonical JSON ({type(error).__name__})"
    return None


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (`decode_json`)."""

    def __init__(self, key: str):
        super().__init__(f"the key {key!r} appears twice in one object")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


def decode_json(text: bytes | str) -> Any:
    """JSON from a platform (an answer, an API body), refusing an object that names a key
    twice (RCPT-1, API-1): ``{"status": "applied", "status": "failed"}`` says two things,
    and a reader that keeps the last would disagree with one that keeps the first.

    Raises:
        DuplicateKey: a key given twice (a ValueError); ValueError: not JSON;
            RecursionError: nested too deep.
    """
    return json.loads(text, object_pairs_hook=_unique_keys)
