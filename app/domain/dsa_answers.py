"""A statement of reasons' submission: its states, and what the Transparency
Database's answer to a batch means for each statement in it (SPEC §7 DSA-3).

From the public repository ``digital-services-act/transparency-database``
(``resources/markdown/api-documentation.md``,
``app/Http/Controllers/Api/v1/StatementMultipleAPIController.php``,
``app/Exceptions/PuidNotUnique*Exception.php``,
``app/Providers/RouteServiceProvider.php``):

* ``POST /api/v1/statements`` takes ``{"statements": [...]}``, 1 to 100 of them,
  and answers ``201`` with ``{"statements": [...]}``, each with its ``uuid`` and
  ``puid``;
* one invalid statement creates none: ``422`` with ``{"errors": {"statement_N":
  {field: [message, ...]}}}``, N the statement's position from 0;
* a puid the platform already used (or twice in the call) creates none: ``422``
  with ``{"message": ..., "errors": {"puid": [...], "existing_puids": [...]}}``;
  validation comes first, so such an answer means every statement was valid;
* beyond 200 requests a second (12000 a minute) per user: ``429`` with
  ``Retry-After``; a wrong token: ``401``; a ``5xx`` is the database's own trouble.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum

from app.domain.case_states import Machine


class StatementState(StrEnum):
    PENDING = "pending"  # built, waiting to be sent (or sent again)
    SUBMITTED = "submitted"  # created in the Transparency Database, or already there
    DEAD_LETTER = "dead_letter"  # refused by the database: kept with its error


class StatementMove(StrEnum):
    SUBMIT = "submit"  # 201, or its puid was already there (existing_puids)
    DEAD_LETTER = "dead_letter"  # its own errors in a 422 (statement_N)
    REQUEUE = "requeue"  # an operator corrected a dead letter: send it again


S = StatementState
DSA_STATEMENT = Machine(
    "dsa_statement",
    StatementState,
    StatementMove,
    {
        StatementMove.SUBMIT: (frozenset({S.PENDING}), S.SUBMITTED),
        StatementMove.DEAD_LETTER: (frozenset({S.PENDING}), S.DEAD_LETTER),
        StatementMove.REQUEUE: (frozenset({S.DEAD_LETTER}), S.PENDING),
    },
)


@dataclass(frozen=True)
class BatchVerdict:
    """What one answer means for the statements of the batch, by puid.

    Attributes:
        created: puid -> the database's uuid (None when the answer did not say):
            submitted now.
        existing: puids the database already holds: submitted (DSA-3).
        refused: puid -> its field errors: dead letters.
        resend: puids neither created nor refused: send again in the next batch.
        retry_after: seconds to wait before sending anything again (429, 5xx, a
            network failure, a wrong token), else None.
        error: a short code for what went wrong, else None.
    """

    created: dict[str, str | None] = field(default_factory=dict)
    existing: frozenset[str] = frozenset()
    refused: dict[str, dict] = field(default_factory=dict)
    resend: tuple[str, ...] = ()
    retry_after: float | None = None
    error: str | None = None


def _json(body: bytes | None) -> dict:
    try:
        value = json.loads(body or b"")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


UUID_TEXT = re.compile(r"[A-Za-z0-9-]{1,100}")  # a uuid's letters; DsaStatement.tdb_uuid holds 100


def _uuid(value) -> str | None:
    """The database's id when it is a short string, else None (a garbage id is not
    kept: it could not be written, and it is only informative)."""
    return value if isinstance(value, str) and UUID_TEXT.fullmatch(value) else None


def read_batch_answer(
    puids: list[str], status: int | None, body: bytes | None, retry_after: float = 15.0
) -> BatchVerdict:
    """What the batch endpoint's answer means for each statement sent (DSA-3).

    Args:
        puids: the batch's puids, in the order sent (``statement_N`` is the N-th).
        status: the HTTP status, or None when no answer came (timeout, network).
        body: the answer's body.
        retry_after: seconds from the answer's Retry-After (or the default).

    Returns:
        The `BatchVerdict`. A ``422`` that names neither statements nor existing
        puids of this batch (the call itself was refused) sends nothing again in
        this run. Never raises, whatever the body: positions are ASCII decimals,
        puids strings, uuids short strings (else ignored).
    """
    everyone = tuple(puids)
    if status is not None and 200 <= status < 300 and status != 201:
        # not the documented answer (a proxy's or a maintenance page's 200, a 202, a 204):
        # nothing says the statements exist; resent later, a created one is then
        # refused as an existing puid (submitted), never created twice
        return BatchVerdict(resend=everyone, retry_after=retry_after, error="tdb_unexpected_answer")
    if status == 201:
        sent = set(puids)
        items = _json(body).get("statements")
        created = {
            item["puid"]: _uuid(item.get("uuid"))
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict) and isinstance(item.get("puid"), str) and item["puid"] in sent
        }
        return BatchVerdict(created={puid: created.get(puid) for puid in puids})
    if status == 422:
        errors = _json(body).get("errors")
        errors = errors if isinstance(errors, dict) else {}
        refused = {}
        for key, value in errors.items():
            index = key.removeprefix("statement_")
            # ASCII decimal positions only: "²" and "١" are digits to str.isdigit
            if key.startswith("statement_") and index.isascii() and index.isdecimal() and int(index) < len(puids):
                refused[puids[int(index)]] = value if isinstance(value, dict) else {"statement": value}
        if refused:
            return BatchVerdict(refused=refused, resend=tuple(p for p in puids if p not in refused))
        existing = errors.get("existing_puids")
        found = frozenset(p for p in existing if isinstance(p, str)) & set(puids) if isinstance(existing, list) else ()
        if found:  # none of ours named: the answer says nothing of this batch; wait
            return BatchVerdict(existing=found, resend=tuple(p for p in puids if p not in found))
        return BatchVerdict(resend=everyone, retry_after=retry_after, error="tdb_batch_refused")
    if status == 429:
        return BatchVerdict(resend=everyone, retry_after=retry_after, error="tdb_rate_limited")
    if status in (401, 403):
        return BatchVerdict(resend=everyone, retry_after=retry_after, error="tdb_unauthorized")
    if status is None or status >= 500 or status == 408:
        return BatchVerdict(resend=everyone, retry_after=retry_after, error="tdb_unavailable")
    return BatchVerdict(resend=everyone, retry_after=retry_after, error=f"tdb_http_{status}")
