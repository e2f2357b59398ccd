"""Installations (tenants) and the operators who use the console."""

from __future__ import annotations

from datetime import datetime

from flask_login import UserMixin
from sqlalchemy import Boolean, ForeignKey, Integer, String, false
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from .base import Base, SealedText, UTCDateTime, created_at_column, id_column, json_column

ROLES = ("moderator", "reviewer", "admin", "auditor", "emergency")  # emergency: may act alone, reviewed afterwards (POL-6)


class Installation(Base):
    """One Trust & Safety team's deployment; every other row belongs to one."""

    __tablename__ = "installations"

    id: Mapped[str] = id_column("ins")
    name: Mapped[str] = mapped_column(String(200))
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = created_at_column()


class OperatorUser(UserMixin, Base):
    """A person who signs in to the console: moderator, reviewer, admin or auditor."""

    __tablename__ = "operator_users"

    id: Mapped[str] = id_column("op")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(500))
    display_name: Mapped[str] = mapped_column(String(200))
    roles_text: Mapped[str] = mapped_column("roles", String(200), default="")
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # Bumped when a password changes or the user is disabled: old sessions stop working.
    session_version: Mapped[int] = mapped_column(default=1)
    # OPS-1: "password" (the sign-in form), or "sso" (only through the identity provider:
    # no usable password, and the provider does the second factor).
    sign_in_method: Mapped[str] = mapped_column(String(20), default="password", server_default="password")
    created_at: Mapped[datetime] = created_at_column()
    last_login_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # The second factor (OPS-2): the TOTP seed, sealed at rest (OPS-3); set when
    # enrolment starts, in force once confirmed with a code. The last time step a
    # code was accepted for: a code is accepted once (no replay). The seed is loaded
    # (and opened) only where a second factor is checked or enrolled, not with the
    # operator every request loads.
    totp_secret: Mapped[str | None] = mapped_column(SealedText("operator_users.totp_secret", plain_allowed=False),
                                                    nullable=True, deferred=True)
    totp_confirmed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    totp_last_step: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Set at enrolment and kept by a reset: an account whose holder enrolled (even a
    # moderator, voluntarily) must enrol again rather than fall back to a password only.
    second_factor_required: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # POL-1: what approval policies' eligibility filters read, set by admins (four-eyes)
    team: Mapped[str | None] = mapped_column(String(100), nullable=True)
    attributes: Mapped[dict[str, str]] = json_column("attributes_json", default=dict)

    @property
    def roles(self) -> frozenset[str]:
        return frozenset(r for r in self.roles_text.split(",") if r)

    @roles.setter
    def roles(self, value) -> None:
        self.roles_text = ",".join(sorted(set(value)))

    def has_role(self, *roles: str) -> bool:
        return bool(self.roles.intersection(roles))

    def set_password(self, password: str) -> None:
        # Werkzeug's default is scrypt, a memory-hard scheme; tests may pick a faster one.
        from flask import current_app

        method = current_app.config.get("PASSWORD_HASH_METHOD", "scrypt")
        self.password_hash = generate_password_hash(password, method=method)

    def check_password(self, password: str) -> bool:
        return check_password_hash(self.password_hash, password)

    @property
    def is_active(self) -> bool:  # Flask-Login refuses inactive users
        return bool(self.active)

    def get_id(self) -> str:
        return f"{self.id}:{self.session_version}"


class OperatorRecoveryCode(Base):
    """One recovery code of an operator's second factor (OPS-2): usable once, in place
    of a TOTP code. Only a SHA-256 of the code is kept; the codes are shown once."""

    __tablename__ = "operator_recovery_codes"

    id: Mapped[str] = id_column("rco")
    operator_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"), index=True)
    code_hash: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = created_at_column()
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class OperatorInvitation(Base):
    """A one-time link with which an invited operator sets their own password (FOUR-6).

    Only the SHA-256 of the token is kept. An invitation is usable while it is
    neither used, nor revoked (a newer one replaced it), nor past ``expires_at``.
    """

    __tablename__ = "operator_invitations"

    id: Mapped[str] = id_column("inv")
    installation_id: Mapped[str] = mapped_column(ForeignKey("installations.id"), index=True)
    operator_id: Mapped[str] = mapped_column(ForeignKey("operator_users.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(100), unique=True)
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = created_at_column()
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
