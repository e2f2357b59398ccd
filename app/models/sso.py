"""Single sign-on (SPEC OPS-1): the identity-provider identity of an operator, and the
installation's mapping from the provider's groups to console roles."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, UTCDateTime, created_at_column, id_column


class SsoIdentity(Base):
    """Who an operator is at the identity provider: the ID token's (``iss``, ``sub``),
    unique, never the email (an email can be reassigned at the provider; the subject
    cannot). One identity per operator."""

    __tablename__ = "sso_identities"
    __table_args__ = (UniqueConstraint("issuer", "subject", name="uq_sso_identities_issuer_subject"),)

    id: Mapped[str] = id_column("sso")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    operator_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"), unique=True)
    issuer: Mapped[str] = mapped_column(String(500))
    subject: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = created_at_column()
    last_sign_in_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class SsoGroupRole(Base):
    """One pair of the installation's group→role mapping, set by a four-eyes change
    (OPS-1, FOUR-2): members of `group_name` at the identity provider hold `role`."""

    __tablename__ = "sso_group_roles"

    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), primary_key=True)
    group_name: Mapped[str] = mapped_column(String(200), primary_key=True)
    role: Mapped[str] = mapped_column(String(50), primary_key=True)
