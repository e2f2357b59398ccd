"""Where the sealed platform secrets stand, and their rotation to a new key (SPEC OPS-3).

Every column of type `SealedText` (or `SealedJSON`) in the models is found from the
metadata, so a column sealed later (a second-factor seed) is counted and rotated
without a change here. Values are read and written raw (the column's text as stored,
no sealing or opening by the type), so a value under a key that is not configured
is counted, never an error.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from flask import current_app
from sqlalchemy import and_, column, select, table, update

from app.extensions import db
from app.models import Installation
from app.models.base import Base, SealedText
from app.secret_box import SecretBox, SecretBoxError, sealed_key_id
from app.services.uow import Actor, unit_of_work

PLAIN = "plain"


@dataclass(frozen=True)
class SealedColumn:
    """A sealed column: its table, primary key, column name and context (``table.column``)."""

    table: str
    key: str
    name: str
    context: str
    has_installation: bool
    plain_allowed: bool = True  # False: a plain value there was never the console's (see SealedText)


def sealed_columns() -> list[SealedColumn]:
    """Every `SealedText` column of the models, by table and column name."""
    found = []
    for tbl in sorted(Base.metadata.tables.values(), key=lambda t: t.name):
        for col in tbl.columns:
            if isinstance(col.type, SealedText):
                [key] = tbl.primary_key.columns  # a sealed column's table has a one-column key
                found.append(SealedColumn(tbl.name, key.name, col.name, col.type.context, "installation_id" in tbl.c,
                                          col.type.plain_allowed))
    return found


def _raw(sealed: SealedColumn):
    """The column as a lightweight table: values as stored, no type processing."""
    cols = [column(sealed.key), column(sealed.name)]
    if sealed.has_installation:
        cols.append(column("installation_id"))
    return table(sealed.table, *cols)


def _box() -> SecretBox:
    return current_app.extensions["secret_box"]


@dataclass
class ColumnStatus:
    """How the values of one sealed column stand: counts by key id, plain text and
    under keys this process does not have."""

    context: str
    by_key: Counter = field(default_factory=Counter)

    @property
    def plain(self) -> int:
        return self.by_key[PLAIN]


@dataclass
class Status:
    """Where an installation's secrets stand (OPS-3).

    Attributes:
        current: the current key's id (SECRETS_KEY).
        previous: ids of the keys in SECRETS_KEY_PREVIOUS.
        columns: one `ColumnStatus` per sealed column.
    """

    current: str
    previous: list[str]
    columns: list[ColumnStatus]

    def total(self, which: str) -> int:
        """Values: ``current`` (under SECRETS_KEY), ``previous``, ``plain`` or ``missing``
        (under a key not configured)."""
        return sum(n for c in self.columns for kid, n in c.by_key.items() if self._kind(kid) == which)

    def _kind(self, kid: str) -> str:
        if kid == PLAIN:
            return PLAIN
        if kid == self.current:
            return "current"
        return "previous" if kid in self.previous else "missing"

    def describe(self, kid: str) -> str:
        return {"current": "current", "previous": "previous", "missing": "NOT CONFIGURED", PLAIN: "PLAIN"}[
            self._kind(kid)
        ]


def secrets_status() -> Status:
    """Count every sealed column's values by key id (OPS-3); reads only."""
    box = _box()
    columns = []
    for sealed in sealed_columns():
        raw = _raw(sealed)
        values = db.session.scalars(select(raw.c[sealed.name]).where(raw.c[sealed.name].is_not(None))).all()
        columns.append(ColumnStatus(sealed.context, Counter(sealed_key_id(v) or PLAIN for v in values if v)))
    db.session.rollback()
    return Status(box.current_id, [k for k in box.key_ids if k != box.current_id], columns)


class RotationRefused(Exception):
    """Some values open under no configured key: rotating now would strand them (OPS-3).

    Attributes:
        code: ``secrets_unreadable``.
        missing: counts by the key id they were sealed under.
    """

    code = "secrets_unreadable"

    def __init__(self, missing: Counter) -> None:
        self.missing = missing
        names = ", ".join(f"{n} under key {kid}" for kid, n in sorted(missing.items()))
        super().__init__(
            f"{sum(missing.values())} sealed values open under no configured key ({names}): "
            "add that key to SECRETS_KEY_PREVIOUS and run again; nothing was changed"
        )


@dataclass
class Rotation:
    """What a rotation did: values re-sealed under the current key, by context."""

    key_id: str
    resealed: Counter = field(default_factory=Counter)  # sealed under a previous key before
    sealed_plain: Counter = field(default_factory=Counter)  # plain text before
    unchanged: int = 0  # under the current key already

    @property
    def changed(self) -> int:
        return sum(self.resealed.values()) + sum(self.sealed_plain.values())


def rotate_secrets_key(invoked_by: dict[str, str]) -> Rotation:
    """Re-seal every sealed value under the current key (SECRETS_KEY), in one
    transaction (OPS-3). Values under a previous key (SECRETS_KEY_PREVIOUS) are opened
    and sealed again; plain values (written before migration 0018, or restored from
    an old dump) are sealed. Idempotent: a second run changes nothing.

    Each installation whose values changed gets a ``secrets.key_rotated`` audit row
    with the counts and the key ids (never a secret), and who ran it (FOUR-10).

    Args:
        invoked_by: the OS user and host running the command.

    Raises:
        RotationRefused: some value opens under no configured key (nothing changed).
    """
    box = _box()
    rotation = Rotation(box.current_id)
    per_installation: dict[str, Counter] = {}
    with unit_of_work() as uow:
        missing: Counter = Counter()
        for sealed in sealed_columns():
            raw = _raw(sealed)
            rows = uow.session.execute(select(raw).where(raw.c[sealed.name].is_not(None))).all()
            for row in rows:
                value = row[1]
                if not value or not box.needs_reseal(value):
                    rotation.unchanged += bool(value)
                    continue
                kid = sealed_key_id(value)
                if not kid and not sealed.plain_allowed:  # sealing it would make a stranger's value trusted
                    missing["plain"] += 1
                    continue
                try:
                    plain = box.open(value, context=sealed.context) if kid else value
                except SecretBoxError:
                    missing[kid] += 1
                    continue
                if not _write(uow.session, raw, sealed, row[0], value, box.seal(plain, context=sealed.context)):
                    continue  # written meanwhile, by a process sealing under the current key
                (rotation.resealed if kid else rotation.sealed_plain)[sealed.context] += 1
                if sealed.has_installation:
                    per_installation.setdefault(row[2], Counter())[sealed.context] += 1
        if missing:
            raise RotationRefused(missing)
        if rotation.changed:
            _audit(uow, rotation, per_installation, box, invoked_by)
        uow.commit()
    return rotation


def _write(session, raw, sealed: SealedColumn, key: Any, before: str, after: str) -> bool:
    """Replace one value, guarded on the value read (a concurrent write wins; a rerun
    reseals what it wrote); whether it did."""
    return session.execute(
        update(raw)
        .where(and_(raw.c[sealed.key] == key, raw.c[sealed.name] == before))
        .values({sealed.name: after})
    ).rowcount == 1


def _audit(uow, rotation: Rotation, per_installation: dict[str, Counter], box: SecretBox, invoked_by) -> None:
    run = uuid.uuid4().hex
    totals = {"resealed": sum(rotation.resealed.values()), "sealed_plain": sum(rotation.sealed_plain.values())}
    for installation_id in db.session.scalars(select(Installation.id)).all():
        uow.audit(
            installation_id,
            f"secrets-key-rotated:{rotation.key_id}:{run}",
            "secrets.key_rotated",
            Actor.system("cli"),
            "installation",
            installation_id,
            {
                "key_id": rotation.key_id,
                "previous_key_ids": sorted(k for k in box.key_ids if k != box.current_id),
                "values": dict(sorted(per_installation.get(installation_id, Counter()).items())),
                "all_installations": totals,
                **invoked_by,
            },
        )
