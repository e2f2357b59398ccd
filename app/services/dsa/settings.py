"""The DSA settings in force for an installation (SPEC §7 DSA-1)."""

from __future__ import annotations

from sqlalchemy import select

from app.domain.dsa_settings import DEFAULT_SETTINGS, DsaSettings, settings_from_json
from app.models import DsaSettingsVersion


def current_settings(session, installation_id: str) -> DsaSettings:
    """The newest approved DSA settings of the installation, else `DEFAULT_SETTINGS`
    (DSA off). One indexed query."""
    row = session.scalar(
        select(DsaSettingsVersion)
        .where(DsaSettingsVersion.installation_id == installation_id)
        .order_by(DsaSettingsVersion.version.desc())
        .limit(1)
    )
    return settings_from_json(row.settings) if row is not None else DEFAULT_SETTINGS
