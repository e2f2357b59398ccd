"""Secrets encrypted at rest (SPEC OPS-3).

Platform credentials (bearer tokens, signing secrets, a PDS admin password) and
operators' second-factor seeds are kept in the database only as AES-GCM ciphertext
under a key from the environment (``SECRETS_KEY``), never stored beside them.

A sealed value is text: ``enc1:<key id>:<base64url of nonce + ciphertext>``. The key
id (8 hex characters of the key's SHA-256) says which key opens it, so a rotation
can keep the previous keys (``SECRETS_KEY_PREVIOUS``) readable while every new write
uses the current one. The column the value belongs to is bound in as associated
data, so a ciphertext copied into another column does not open.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets as stdlib_secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "enc1"
NONCE_BYTES = 12


class SecretBoxError(ValueError):
    """A sealed value that no configured key opens, or a malformed key (OPS-3)."""


def key_id(key: bytes) -> str:
    """The 8-hex-character id of a 32-byte key, written into each sealed value."""
    return hashlib.sha256(key).hexdigest()[:8]


def decode_key(text: str) -> bytes:
    """A key as written in the environment: base64url (padding optional) of 32 bytes.

    Raises:
        SecretBoxError: when the text is not base64 of exactly 32 bytes.
    """
    text = text.strip()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise SecretBoxError("SECRETS_KEY must be base64url of 32 random bytes") from exc
    if len(raw) != 32:
        raise SecretBoxError("SECRETS_KEY must be base64url of 32 random bytes")
    return raw


def new_key_text() -> str:
    """A fresh key, as text for ``SECRETS_KEY`` (base64url of 32 random bytes)."""
    return base64.urlsafe_b64encode(stdlib_secrets.token_bytes(32)).decode().rstrip("=")


def is_sealed(value: str | None) -> bool:
    """Whether a stored value is a sealed secret (rather than plain text)."""
    return bool(value) and value.startswith(PREFIX + ":")


class SecretBox:
    """Seals with the current key; opens with the current or any previous key (OPS-3).

    Args:
        current: the 32-byte key every new value is sealed with.
        previous: keys still accepted for opening (during a rotation).
    """

    def __init__(self, current: bytes, previous: tuple[bytes, ...] = ()) -> None:
        self.current_id = key_id(current)
        self._keys = {key_id(k): AESGCM(k) for k in (*previous, current)}

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key this box opens with (previous ones, then the current)."""
        return tuple(self._keys)

    def seal(self, plaintext: str, *, context: str) -> str:
        """``plaintext`` sealed under the current key, bound to ``context`` (e.g.
        ``"connection_versions.bearer_token"``)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.current_id].encrypt(nonce, plaintext.encode(), context.encode())
        return f"{PREFIX}:{self.current_id}:{base64.urlsafe_b64encode(nonce + sealed).decode()}"

    def open(self, value: str, *, context: str) -> str:
        """The plaintext of a sealed value.

        Raises:
            SecretBoxError: the value is not sealed, its key is not configured, or it
                was sealed for another context or altered.
        """
        try:
            prefix, kid, body = value.split(":", 2)
        except ValueError as exc:
            raise SecretBoxError("not a sealed secret") from exc
        if prefix != PREFIX:
            raise SecretBoxError("not a sealed secret")
        aead = self._keys.get(kid)
        if aead is None:
            raise SecretBoxError(f"sealed under key {kid}, which is not configured (SECRETS_KEY, SECRETS_KEY_PREVIOUS)")
        try:  # an altered body (cut, not base64, shorter than a nonce) is as unreadable as a wrong key
            raw = base64.urlsafe_b64decode(body)
            return aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], context.encode()).decode()
        except (InvalidTag, ValueError, TypeError) as exc:
            raise SecretBoxError(f"a sealed secret for {context} did not open (altered or moved)") from exc

    def needs_reseal(self, value: str | None) -> bool:
        """Whether a stored value is plain text or sealed under a key other than the current one."""
        if not value:
            return False
        return not is_sealed(value) or value.split(":", 2)[1] != self.current_id


class UnreadableSecret:
    """What a `SealedText` column gives back for a value no configured key opens (OPS-3).

    Not a ``str``, so it can never be sent as a credential by mistake; truthy, so "is a
    secret set?" still says yes. Written back as it is (``stored``), so copying a row
    (a new connection version keeping its token) loses nothing: once the missing key is
    configured again the value opens.

    Attributes:
        stored: the sealed text as stored.
        reason: why it did not open (names the key id, never the secret).
    """

    __slots__ = ("stored", "reason")

    def __init__(self, stored: str, reason: str) -> None:
        self.stored = stored
        self.reason = reason

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnreadableSecret) and other.stored == self.stored

    def __hash__(self) -> int:
        return hash(self.stored)

    def __repr__(self) -> str:
        return f"<unreadable secret: {self.reason}>"

    __str__ = __repr__


def sealed_key_id(value: str) -> str | None:
    """The key id a sealed value names, or None for plain text."""
    return value.split(":", 2)[1] if is_sealed(value) else None


def box_from_texts(current: str, previous: str = "") -> SecretBox:
    """A box from ``SECRETS_KEY`` and a comma- or space-separated ``SECRETS_KEY_PREVIOUS``.

    Raises:
        SecretBoxError: a key is not base64url of 32 bytes.
    """
    olds = tuple(decode_key(t) for t in previous.replace(",", " ").split())
    return SecretBox(decode_key(current), olds)
