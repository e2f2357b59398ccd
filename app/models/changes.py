"""Configuration changes waiting for a second admin (SPEC FOUR-2)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, SealedJSON, UTCDateTime, created_at_column, id_column, json_column


class ConfigChange(Base):
    """A configuration change stored with the digest of its exact content.

    Nothing it describes exists until it is applied: a second admin's approval (bound
    to `digest`) or the CLI break-glass command applies it through the admin services
    in the same transaction. `content_json` holds no secret: new secrets (a bearer
    token, a generated signing secret, a password hash) wait in `secrets_json`, which
    is never shown, is sealed at rest (OPS-3) and is cleared once the change is decided; the content carries
    their digests, so the approved digest binds them too.

    Attributes:
        kind: an `app.domain.config_changes.ChangeKind` value, e.g. ``budget.limit``.
        subject_type, subject_id: what it changes (no id for a creation).
        summary: one line for lists, e.g. "Raise the limit of … to 12".
        reasons_json: why it needs a second admin (a list of sentences).
        state: pending, approved (inside the approving transaction), rejected, applied.
        decided_via: ``console`` (a second admin) or ``break_glass`` (the CLI).
        reason: the rejection's or the break-glass reason.
        result_json: what applying it created (ids), for links in the history.
    """

    __tablename__ = "config_changes"
    __table_args__ = (
        Index("ix_config_changes_installation_state", "installation_id", "state", "created_at"),
        CheckConstraint("state IN ('pending', 'approved', 'rejected', 'applied')", name="state"),
    )

    id: Mapped[str] = id_column("cfg")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"))
    kind: Mapped[str] = mapped_column(String(40))
    subject_type: Mapped[str] = mapped_column(String(50))
    subject_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    summary: Mapped[str] = mapped_column(String(500))
    content: Mapped[dict] = json_column("content_json")
    digest: Mapped[str] = mapped_column(String(80))
    reasons: Mapped[list[str]] = json_column("reasons_json", default=list)
    # OPS-3: sealed at rest under SECRETS_KEY (canonical JSON inside the ciphertext).
    secrets: Mapped[dict | None] = mapped_column(
        "secrets_json", SealedJSON("config_changes.secrets_json"), nullable=True
    )
    proposed_by: Mapped[str] = mapped_column(ForeignKey("operator_users.id"))
    state: Mapped[str] = mapped_column(String(20), default="pending")
    decided_by: Mapped[str | None] = mapped_column(ForeignKey("operator_users.id"), nullable=True)
    decided_via: Mapped[str | None] = mapped_column(String(20), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    result: Mapped[dict | None] = json_column("result_json", nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


def add_settings_version(session, model, installation_id: str, document: dict, change_id: str | None = None):
    """Put `document` in force as the installation's next settings version (FOUR-4):
    one row of `model` (`ApprovalSettingsVersion` or `DsaSettingsVersion`, which share
    their columns) numbered after the newest, flushed, so the (installation, version)
    constraint refuses a version saved at the same moment.

    Returns:
        The new row.
    """
    from sqlalchemy import select

    from app.domain.digests import json_digest

    latest = session.scalar(
        select(model.version).where(model.installation_id == installation_id).order_by(model.version.desc()).limit(1)
    )
    row = model(
        installation_id=installation_id,
        version=(latest or 0) + 1,
        settings=document,
        settings_digest=json_digest(document),
        change_id=change_id,
    )
    session.add(row)
    session.flush()
    return row
