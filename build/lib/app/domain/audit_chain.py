"""The audit hash chain and its checkpoints, as pure functions (SPEC AUD-2, REC-3, REC-4).

Each row's hash is ``hmac-sha256:{key id}:{hex}``: an HMAC-SHA256 under the chain key
(``AUDIT_CHAIN_KEY``, never stored in the database) of the previous row's hash and
the row's canonical fields. Without the key nobody can recompute the chain after an
edit. The key id (an HMAC of a constant under the key) names the key without
revealing it, so a process holding the wrong key is told so.

Rows written before the chain was keyed carry ``sha256:{hex}`` (plain SHA-256). They
stay as they are: an ``audit.rechained`` row, keyed, links to the last of them and so
seals them; after it every row must be keyed.

A checkpoint is a signed statement of an installation's head (last sequence, head
hash, row count, time) kept outside the database. Checkpoints are signed with a key
derived from the chain key: the processes that write checkpoints already hold the
chain key, so a second secret beside it would add a secret to lose and no
separation.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .digests import canonical_json

GENESIS_HASH = "sha256:" + "0" * 64
LEGACY = "sha256"
KEYED = "hmac-sha256"
RECHAINED_ACTION = "audit.rechained"
CHECKPOINT_KIND = "audit_checkpoint"
CHECKPOINT_FIELDS = ("kind", "v", "installation_id", "seq", "head_hash", "rows", "at", "key_id")
MIN_KEY_LENGTH = 32


def key_id(key: bytes) -> str:
    """A short public name of a chain key (16 hex characters); it reveals nothing of the key."""
    return hmac.new(key, b"audit-chain key id", hashlib.sha256).hexdigest()[:16]


def legacy_row_hash(prev_hash: str, material: Mapping[str, Any]) -> str:
    """The first version's unkeyed row hash: ``sha256:`` + SHA-256 (AUD-2)."""
    text = prev_hash + "\n" + canonical_json(dict(material))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def keyed_row_hash(prev_hash: str, material: Mapping[str, Any], key: bytes) -> str:
    """A row's hash chained to its predecessor under the chain key (REC-3).

    Args:
        prev_hash: the previous row's ``row_hash`` (``GENESIS_HASH`` for the first).
        material: the row's fields (see ``app.services.uow.audit_hash_material``).
        key: the chain key's bytes.

    Returns:
        ``hmac-sha256:{key id}:{64 hex}`` (93 characters).
    """
    text = prev_hash + "\n" + canonical_json(dict(material))
    mac = hmac.new(key, text.encode(), hashlib.sha256).hexdigest()
    return f"{KEYED}:{key_id(key)}:{mac}"


def hash_scheme(row_hash: str) -> tuple[str, str | None]:
    """(scheme, key id) of a stored hash: (``sha256``, None), (``hmac-sha256``, id) or ("", None)."""
    parts = row_hash.split(":")
    if len(parts) == 2 and parts[0] == LEGACY:
        return LEGACY, None
    if len(parts) == 3 and parts[0] == KEYED:
        return KEYED, parts[1]
    return "", None


def _checkpoint_key(key: bytes) -> bytes:
    return hmac.new(key, b"audit-checkpoint v1", hashlib.sha256).digest()


def sign_checkpoint(installation_id: str, seq: int, head_hash: str, rows: int, at: str, key: bytes) -> dict[str, Any]:
    """A signed checkpoint of one installation's chain head (REC-4).

    Args:
        installation_id: the installation whose chain it covers.
        seq: the last sequence number (0 for an empty chain).
        head_hash: that row's ``row_hash``.
        rows: how many rows the chain has.
        at: ISO-8601 UTC time it was taken.
        key: the chain key's bytes (the signing key is derived from it).

    Returns:
        A JSON object: the fields of ``CHECKPOINT_FIELDS`` and ``signature``.
    """
    record = {
        "kind": CHECKPOINT_KIND,
        "v": 1,
        "installation_id": installation_id,
        "seq": seq,
        "head_hash": head_hash,
        "rows": rows,
        "at": at,
        "key_id": key_id(key),
    }
    mac = hmac.new(_checkpoint_key(key), canonical_json(record).encode(), hashlib.sha256).hexdigest()
    return {**record, "signature": f"{KEYED}:{mac}"}


@dataclass(frozen=True)
class Checkpoint:
    installation_id: str
    seq: int
    head_hash: str
    rows: int
    at: str


def read_checkpoint(record: Any, key: bytes) -> Checkpoint:
    """Check a checkpoint's shape and signature.

    Args:
        record: a parsed JSON line: a checkpoint, or a log record carrying one under
            ``audit_checkpoint`` (as the log stream writes it).
        key: the chain key's bytes.

    Raises:
        ValueError: with the reason, when it is not a checkpoint, was signed under
            another key, or its signature does not match its content.
    """
    if isinstance(record, dict) and isinstance(record.get("audit_checkpoint"), dict):
        record = record["audit_checkpoint"]
    if not isinstance(record, dict) or record.get("kind") != CHECKPOINT_KIND or record.get("v") != 1:
        raise ValueError("not an audit checkpoint")
    fields = {name: record.get(name) for name in CHECKPOINT_FIELDS}
    if not (
        isinstance(fields["installation_id"], str)
        and isinstance(fields["head_hash"], str)
        and isinstance(fields["at"], str)
        and all(type(fields[n]) is int and fields[n] >= 0 for n in ("seq", "rows"))
    ):
        raise ValueError("a checkpoint field is missing or of the wrong type")
    if fields["key_id"] != key_id(key):
        raise ValueError(f"signed under key id {fields['key_id']}, but AUDIT_CHAIN_KEY has key id {key_id(key)}")
    expected = sign_checkpoint(
        fields["installation_id"], fields["seq"], fields["head_hash"], fields["rows"], fields["at"], key
    )
    if not hmac.compare_digest(str(record.get("signature")), expected["signature"]):
        raise ValueError("signature does not match its content (the checkpoint was altered or forged)")
    return Checkpoint(fields["installation_id"], fields["seq"], fields["head_hash"], fields["rows"], fields["at"])


@dataclass(frozen=True)
class ChainReport:
    """What verifying one installation's chain found (``ok`` when ``reason`` is None)."""

    installation_id: str
    rows_checked: int
    first_broken_seq: int | None
    reason: str | None
    legacy_rows: int = 0
    checkpoints_checked: int = 0
    head_seq: int = 0

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass
class ChainWalk:
    """Verifies a chain fed row by row in sequence order (AUD-2, REC-3, REC-4).

    A row is broken when its sequence skips, its ``prev_hash`` is not the previous
    row's hash, or its hash does not match its contents under the key; when an
    unkeyed row follows keyed ones, or keyed rows follow unkeyed ones without an
    ``audit.rechained`` row; or when a checkpoint saw another hash at its sequence.
    A checkpoint beyond the last row means the tail was cut.
    """

    installation_id: str
    key: bytes
    checkpoints: Iterable[Checkpoint] = ()
    rows_checked: int = 0
    legacy_rows: int = 0
    _expected_seq: int = 1
    _prev_hash: str = GENESIS_HASH
    _keyed: bool = False
    _broken: tuple[int, str] | None = None
    _by_seq: dict[int, list[Checkpoint]] = field(default_factory=dict)
    _last_agreeing: int = 0
    _checked: int = 0

    def __post_init__(self) -> None:
        self._key_id = key_id(self.key)
        for checkpoint in self.checkpoints:
            self._by_seq.setdefault(checkpoint.seq, []).append(checkpoint)

    @property
    def broken(self) -> bool:
        return self._broken is not None

    def feed(self, seq: int, action: str, prev_hash: str, row_hash: str, material: Mapping[str, Any]) -> None:
        """Check the next row; after a break, further rows are ignored."""
        if self._broken:
            return
        self.rows_checked += 1
        problem = self._row_problem(seq, action, prev_hash, row_hash, material)
        if problem:
            self._broken = (self._expected_seq if problem == "missing row" else seq, problem)
            return
        self._check_checkpoints(seq, row_hash)
        self._prev_hash, self._expected_seq = row_hash, seq + 1

    def _row_problem(self, seq, action, prev_hash, row_hash, material) -> str | None:
        if seq != self._expected_seq:
            return "missing row"
        if prev_hash != self._prev_hash:
            return "previous hash does not match"
        scheme, row_key_id = hash_scheme(row_hash)
        if scheme == LEGACY:
            if self._keyed:
                return "unkeyed row after keyed rows (rewritten without the chain key)"
            self.legacy_rows += 1
            return None if row_hash == legacy_row_hash(prev_hash, material) else "row contents changed"
        if scheme != KEYED:
            return "unknown hash scheme"
        if row_key_id != self._key_id:
            return f"written under key id {row_key_id}, but AUDIT_CHAIN_KEY has key id {self._key_id}"
        if not self._keyed and self.legacy_rows and action != RECHAINED_ACTION:
            return f"keyed rows follow unkeyed ones without an {RECHAINED_ACTION} row"
        self._keyed = True
        expected = keyed_row_hash(prev_hash, material, self.key)
        return None if hmac.compare_digest(row_hash, expected) else "row contents changed"

    def _check_checkpoints(self, seq: int, row_hash: str) -> None:
        for checkpoint in self._by_seq.get(seq, ()):
            self._checked += 1
            if checkpoint.head_hash != row_hash or checkpoint.rows != self.rows_checked:
                since = f"after seq {self._last_agreeing}" if self._last_agreeing else "from the first row"
                self._broken = (
                    seq,
                    f"rewritten: the checkpoint of {checkpoint.at} saw another head at seq {seq} "
                    f"({checkpoint.rows} rows); rows {since} up to seq {seq} were changed and rechained",
                )
                return
            self._last_agreeing = seq

    def finish(self) -> ChainReport:
        """The report once every row was fed."""
        head = self._expected_seq - 1
        if self._broken:
            seq, reason = self._broken
            return self._report(seq, reason, head)
        beyond = [c for seq, cs in self._by_seq.items() if seq > head for c in cs]
        if beyond:
            last = max(beyond, key=lambda c: (c.seq, c.at))
            return self._report(
                head + 1,
                f"cut tail: the checkpoint of {last.at} saw seq {last.seq} ({last.rows} rows); "
                f"the database ends at seq {head} ({self.rows_checked} rows)",
                head,
            )
        if self.legacy_rows and not self._keyed:
            return self._report(
                None,
                f"{self.legacy_rows} rows were hashed without AUDIT_CHAIN_KEY; "
                "run `flask audit-rekey` to seal them under the key",
                head,
            )
        return self._report(None, None, head)

    def _report(self, seq: int | None, reason: str | None, head: int) -> ChainReport:
        return ChainReport(self.installation_id, self.rows_checked, seq, reason, self.legacy_rows, self._checked, head)
