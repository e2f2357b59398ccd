"""Connections: where actions are delivered. A connection is a named destination;
its settings (base URL, bearer token, Standard Webhooks signing secret, timeout,
allowed hosts) live in immutable versions, and a change is a new version.

Secrets are written once and never read back to a page: the views get
`ConnectionVersionView`, which only says whether each secret is set. A signing
secret generated here is returned once, so the admin can give it to the platform.

A version that changes the destination (scheme, host, port, allowed hosts) or a
secret is a configuration change for a second admin (SPEC FOUR-2,
`app.services.admin.changes`), and a version whose origin differs from the previous
one's cannot keep the stored secrets (SEC-4).
"""

from __future__ import annotations

import base64
import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime
from secrets import token_bytes
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.domain.config_changes import ChangeKind, origin_text, secrets_need_reentry
from app.domain.errors import ApiError
from app.extensions import db
from app.models import Connection, ConnectionVersion, Integration, OperatorUser
from app.models.components import MAX_CONNECTION_TIMEOUT_SECONDS
from app.services.admin.changes import ApplyContext, ChangeType, PendingChange, secret_digests, submit
from app.services.admin.input import (
    latest_version,
    lock_owned,
    owned,
    parse_number,
    plausible_id,
)
from app.services.uow import UnitOfWork, unit_of_work

BEARER_ACTIONS = ("keep", "set", "none")
SIGNING_ACTIONS = ("keep", "generate", "none")
MAX_ALLOWED_HOSTS = 50
MAX_URL_LENGTH = 2000
BEARER_PATTERN = re.compile(r"^[\x21-\x7e]{1,500}$")  # visible ASCII: it goes into a header
HOST_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOSTNAME_PATTERN = re.compile(rf"^(?=.{{1,253}}$){HOST_LABEL}(?:\.{HOST_LABEL})*$")


def new_signing_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(token_bytes(32)).decode()


@dataclass(frozen=True)
class ConnectionSettings:
    """The settings of a new connection version, as typed into the form.

    Attributes:
        base_url: ``http://`` or ``https://`` URL without credentials, query or fragment.
        bearer_token_action: ``keep`` (the previous version's, new versions only),
            ``set`` (use `bearer_token`) or ``none``.
        bearer_token: the token when the action is ``set``.
        signing_secret_action: ``keep`` (new versions only), ``generate`` (a new
            ``whsec_`` secret, shown once) or ``none``.
        timeout_seconds: a number of seconds, 1..120 (text or number).
        allowed_hosts: host names or IP addresses, as a list or as text separated
            by commas, spaces or new lines; must include the base URL's host.
        breaker_failure_threshold: consecutive failures that open the breaker, 1..1000 (CONN-1).
        breaker_first_probe_seconds: seconds to the first probe, 1..3600 (CONN-1).
        breaker_max_probe_seconds: the doubling probe delay's cap, seconds, ≥ the first, ≤ 86,400.
        failure_window_hours: failing this long disables the endpoint, 1..720 hours (CONN-3).
        rate_limit_per_second: requests per second across every worker, 0.01..10,000, or
            empty for none (CONN-2).
    """

    base_url: str
    bearer_token_action: str = "none"
    bearer_token: str | None = None
    signing_secret_action: str = "none"
    timeout_seconds: Any = 30
    allowed_hosts: Any = ""
    # CONN-1..3: the connection's health settings (text or number; "" for the rate limit: none)
    breaker_failure_threshold: Any = 5
    breaker_first_probe_seconds: Any = 30
    breaker_max_probe_seconds: Any = 600
    failure_window_hours: Any = 24
    rate_limit_per_second: Any = ""


@dataclass(frozen=True)
class ConnectionSaved:
    """What saving a connection version gave.

    Attributes:
        signing_secret: the signing secret generated now (shown once), else None.
    """

    connection_id: str
    version_id: str
    version: int
    signing_secret: str | None


@dataclass(frozen=True)
class ConnectionVersionView:
    """A connection version without its secrets."""

    id: str
    version: int
    base_url: str
    timeout_seconds: float
    allowed_hosts: list[str]
    has_bearer_token: bool
    has_signing_secret: bool
    created_at: datetime
    breaker_failure_threshold: int = 5
    breaker_first_probe_seconds: float = 30
    breaker_max_probe_seconds: float = 600
    failure_window_seconds: float = 86_400
    rate_limit_per_second: float | None = None


@dataclass(frozen=True)
class ConnectionListing:
    connection: Connection
    integration_name: str | None
    versions: list[ConnectionVersionView]  # newest first

    @property
    def latest(self) -> ConnectionVersionView | None:
        return self.versions[0] if self.versions else None


def _view(version: ConnectionVersion) -> ConnectionVersionView:
    return ConnectionVersionView(
        id=version.id,
        version=version.version,
        base_url=version.base_url,
        timeout_seconds=version.timeout_seconds,
        allowed_hosts=version.allowed_hosts,
        has_bearer_token=bool(version.bearer_token),
        has_signing_secret=bool(version.signing_secret),
        created_at=version.created_at,
        breaker_failure_threshold=version.breaker_failure_threshold,
        breaker_first_probe_seconds=version.breaker_first_probe_seconds,
        breaker_max_probe_seconds=version.breaker_max_probe_seconds,
        failure_window_seconds=version.failure_window_seconds,
        rate_limit_per_second=version.rate_limit_per_second,
    )


def list_connections(installation_id: str) -> list[ConnectionListing]:
    """The installation's connections by name, each with its versions (newest first)."""
    connections = db.session.execute(
        select(Connection, Integration.name)
        .outerjoin(Integration, Integration.id == Connection.integration_id)
        .where(Connection.installation_id == installation_id)
        .order_by(Connection.name, Connection.id)
    ).all()
    versions: dict[str, list[ConnectionVersionView]] = {}
    for version in db.session.scalars(
        select(ConnectionVersion)
        .where(ConnectionVersion.installation_id == installation_id)
        .order_by(ConnectionVersion.connection_id, ConnectionVersion.version.desc())
    ):
        versions.setdefault(version.connection_id, []).append(_view(version))
    return [ConnectionListing(c, name, versions.get(c.id, [])) for c, name in connections]


def connection_detail(installation_id: str, connection_id: str) -> ConnectionListing:
    """One connection of the installation with its versions.

    Raises:
        ApiError: 404 ``connection_not_found`` (also for another installation's).
    """
    connection = db.session.get(Connection, connection_id) if plausible_id(connection_id) else None
    if connection is None or connection.installation_id != installation_id:
        raise ApiError(404, "connection_not_found", "No such connection.")
    integration = db.session.get(Integration, connection.integration_id) if connection.integration_id else None
    versions = [
        _view(v)
        for v in db.session.scalars(
            select(ConnectionVersion)
            .where(
                ConnectionVersion.connection_id == connection.id, ConnectionVersion.installation_id == installation_id
            )
            .order_by(ConnectionVersion.version.desc())
        )
    ]
    return ConnectionListing(connection, integration.name if integration else None, versions)


def clean_base_url(value: Any) -> tuple[str, str]:
    """The base URL and its host (lowercase).

    Raises:
        ApiError: 400 ``connection_url_invalid``.
    """
    message = "Give an http:// or https:// URL with a host, and no user name, password, query or fragment."
    url = value.strip() if isinstance(value, str) else ""
    if not url or len(url) > MAX_URL_LENGTH or any(ord(ch) <= 32 or ord(ch) == 127 for ch in url):
        raise ApiError(400, "connection_url_invalid", message, "base_url")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError as error:
        raise ApiError(400, "connection_url_invalid", message, "base_url") from error
    host = (parts.hostname or "").lower()
    if (
        parts.scheme not in ("http", "https")
        or not host
        or parts.username is not None
        or parts.password is not None
        or parts.query
        or parts.fragment
        or "?" in url
        or "#" in url
        or port == 0
        or not _valid_host(host)
    ):
        raise ApiError(400, "connection_url_invalid", message, "base_url")
    return url, host


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(HOSTNAME_PATTERN.match(host))


def clean_allowed_hosts(value: Any, base_host: str) -> list[str]:
    """Allowed hosts: unique, lowercase, sorted; the base URL's host among them.

    Raises:
        ApiError: 400 ``connection_allowed_hosts_invalid``.
    """
    if isinstance(value, str):
        items = re.split(r"[\s,]+", value.strip()) if value.strip() else []
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        items = None
    if items is None or len(items) > MAX_ALLOWED_HOSTS:
        raise ApiError(
            400,
            "connection_allowed_hosts_invalid",
            f"List at most {MAX_ALLOWED_HOSTS} allowed hosts, separated by commas or new lines.",
            "allowed_hosts",
        )
    hosts = set()
    for item in items:
        host = item.lower().removeprefix("[").removesuffix("]")
        if not _valid_host(host):
            raise ApiError(
                400,
                "connection_allowed_hosts_invalid",
                f"{item[:100]!r} is not a host name or IP address (no scheme, port or path).",
                "allowed_hosts",
            )
        hosts.add(host)
    if base_host not in hosts:
        raise ApiError(
            400,
            "connection_allowed_hosts_invalid",
            f"The allowed hosts must include the base URL's host ({base_host}); deliveries elsewhere are refused.",
            "allowed_hosts",
        )
    return sorted(hosts)


def _choose_secret(action: Any, allowed: tuple[str, ...], code: str, field: str, message: str) -> str:
    if action not in allowed:
        raise ApiError(400, code, message, field)
    return action


def _settings_content(
    settings: ConnectionSettings, previous: ConnectionVersion | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Validate settings typed into the form.

    Returns:
        (content, secrets): the settings as a change's content, which names what
        happens to each secret (``keep``, ``set``/``generate``, ``none``) and holds
        the digests of new ones; and the new secret values (a signing secret is
        generated here).
    """
    base_url, host = clean_base_url(settings.base_url)
    timeout = parse_number(
        settings.timeout_seconds,
        code="connection_timeout_invalid",
        field="timeout_seconds",
        minimum=1,
        maximum=MAX_CONNECTION_TIMEOUT_SECONDS,
        message=f"The timeout is a number of seconds from 1 to {MAX_CONNECTION_TIMEOUT_SECONDS}.",
    )
    hosts = clean_allowed_hosts(settings.allowed_hosts, host)
    health = clean_health_settings(settings)
    new_secrets: dict[str, str] = {}
    bearer_allowed = BEARER_ACTIONS if previous is not None else ("set", "none")
    bearer_action = _choose_secret(
        settings.bearer_token_action,
        bearer_allowed,
        "connection_bearer_token_invalid",
        "bearer_token_action",
        "Choose what to do with the bearer token: " + ", ".join(bearer_allowed) + ".",
    )
    if bearer_action == "set":
        bearer = settings.bearer_token.strip() if isinstance(settings.bearer_token, str) else ""
        if not BEARER_PATTERN.match(bearer):
            raise ApiError(
                400,
                "connection_bearer_token_invalid",
                "A bearer token has 1 to 500 visible ASCII characters (no spaces).",
                "bearer_token",
            )
        new_secrets["bearer_token"] = bearer
    signing_allowed = SIGNING_ACTIONS if previous is not None else ("generate", "none")
    signing_action = _choose_secret(
        settings.signing_secret_action,
        signing_allowed,
        "connection_signing_secret_invalid",
        "signing_secret_action",
        "Choose what to do with the signing secret: " + ", ".join(signing_allowed) + ".",
    )
    _refuse_secrets_to_new_origin(previous, base_url, bearer_action, signing_action)
    if signing_action == "generate":
        new_secrets["signing_secret"] = new_signing_secret()
    content = {
        "base_url": base_url,
        "timeout_seconds": timeout,
        "allowed_hosts": hosts,
        "bearer_token": bearer_action,
        "signing_secret": signing_action,
        "secret_digests": secret_digests(new_secrets),
        **health,
    }
    return content, new_secrets


HEALTH_DEFAULTS = {
    "breaker_failure_threshold": 5,
    "breaker_first_probe_seconds": 30.0,
    "breaker_max_probe_seconds": 600.0,
    "failure_window_seconds": 86_400.0,
    "rate_limit_per_second": None,
}


def clean_health_settings(settings: ConnectionSettings) -> dict[str, Any]:
    """The health settings of a version (CONN-1..3), as columns.

    Raises:
        ApiError: 400 ``connection_breaker_invalid``, ``connection_failure_window_invalid``,
            ``connection_rate_limit_invalid``.
    """

    def number(value, field, minimum, maximum, code, message):
        return parse_number(value, code=code, field=field, minimum=minimum, maximum=maximum, message=message)

    threshold = number(
        settings.breaker_failure_threshold,
        "breaker_failure_threshold",
        1,
        1000,
        "connection_breaker_invalid",
        "The breaker opens after a whole number of consecutive failures, 1 to 1000.",
    )
    if threshold != int(threshold):
        raise ApiError(
            400,
            "connection_breaker_invalid",
            "The breaker opens after a whole number of consecutive failures, 1 to 1000.",
            "breaker_failure_threshold",
        )
    first = number(
        settings.breaker_first_probe_seconds,
        "breaker_first_probe_seconds",
        1,
        3600,
        "connection_breaker_invalid",
        "The first probe comes 1 to 3600 seconds after the breaker opens.",
    )
    most = number(
        settings.breaker_max_probe_seconds,
        "breaker_max_probe_seconds",
        first,
        86_400,
        "connection_breaker_invalid",
        f"The longest probe delay is {first:g} to 86400 seconds (at least the first probe's).",
    )
    hours = number(
        settings.failure_window_hours,
        "failure_window_hours",
        1,
        720,
        "connection_failure_window_invalid",
        "A connection failing for 1 to 720 hours is disabled: give a number of hours.",
    )
    rate = settings.rate_limit_per_second
    if rate is None or (isinstance(rate, str) and not rate.strip()):
        rate = None
    else:
        rate = number(
            rate,
            "rate_limit_per_second",
            0.01,
            10_000,
            "connection_rate_limit_invalid",
            "Give requests per second from 0.01 to 10000, or leave it empty for no limit.",
        )
    return {
        "breaker_failure_threshold": int(threshold),
        "breaker_first_probe_seconds": first,
        "breaker_max_probe_seconds": most,
        "failure_window_seconds": hours * 3600,
        "rate_limit_per_second": rate,
    }


def _version_row(
    content: dict[str, Any], secrets: dict[str, str], previous: ConnectionVersion | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The version's columns and audit details from a change's content and secrets.

    Raises:
        ApiError: 400 ``connection_secrets_reentry_required`` (SEC-4); 409
            ``config_change_invalid`` when the secrets are not the ones the content names.
    """
    if secret_digests(secrets) != content["secret_digests"]:
        raise ApiError(409, "config_change_invalid", "The change's secrets do not match its content.")
    bearer_action, signing_action = content["bearer_token"], content["signing_secret"]
    _refuse_secrets_to_new_origin(previous, content["base_url"], bearer_action, signing_action)
    bearer = previous.bearer_token if bearer_action == "keep" and previous else secrets.get("bearer_token")
    signing = previous.signing_secret if signing_action == "keep" and previous else secrets.get("signing_secret")
    columns = {
        "base_url": content["base_url"],
        "bearer_token": bearer or None,
        "signing_secret": signing or None,
        "timeout_seconds": content["timeout_seconds"],
        "allowed_hosts": content["allowed_hosts"],
        **{key: content.get(key, default) for key, default in HEALTH_DEFAULTS.items()},
    }
    # The audit trail says what happened to each secret, never the secret itself.
    details = {
        "base_url": content["base_url"],
        "timeout_seconds": content["timeout_seconds"],
        "allowed_hosts": content["allowed_hosts"],
        **{key: content.get(key, default) for key, default in HEALTH_DEFAULTS.items()},
        "bearer_token": _secret_note(bearer_action, bool(bearer)),
        "signing_secret": _secret_note(signing_action, bool(signing)),
    }
    return columns, details


def _refuse_secrets_to_new_origin(
    previous: ConnectionVersion | None, base_url: str, bearer_action: str, signing_action: str
) -> None:
    """Secrets stored for one origin are never sent to another (SEC-4).

    Raises:
        ApiError: 400 ``connection_secrets_reentry_required`` when the new base URL's
            origin (scheme, host, port) differs from the previous version's and a
            stored secret would be kept.
    """
    if previous is None or not secrets_need_reentry(previous.base_url, base_url):
        return
    kept = [
        field
        for field, action, stored in (
            ("bearer_token_action", bearer_action, previous.bearer_token),
            ("signing_secret_action", signing_action, previous.signing_secret),
        )
        if action == "keep" and stored
    ]
    if kept:
        raise ApiError(
            400,
            "connection_secrets_reentry_required",
            f"The destination moves from {origin_text(previous.base_url)} to {origin_text(base_url)}: "
            "secrets stored for the old destination are never sent to a new one. Enter the bearer "
            "token again and generate a new signing secret (or remove them).",
            kept[0],
        )


def _secret_note(action: str, present: bool) -> str:
    if not present:
        return "not set"
    return {"keep": "kept", "set": "set", "generate": "generated"}[action]


def _lock_connection(session, installation_id: str, connection_id: Any) -> Connection:
    return lock_owned(session, Connection, connection_id, installation_id, "connection_not_found", "connection")


def _latest(session, connection: Connection) -> ConnectionVersion | None:
    return latest_version(session, ConnectionVersion, ConnectionVersion.connection_id, connection.id)


def _current_version(session, installation_id: str, content: dict[str, Any]) -> dict[str, Any]:
    connection = owned(
        session, Connection, content["connection_id"], installation_id, "connection_not_found", "connection"
    )
    latest = _latest(session, connection)
    current: dict[str, Any] = {"connection": connection.name, "version": latest.version if latest else 0}
    if latest is not None:
        current |= {
            "base_url": latest.base_url,
            "timeout_seconds": latest.timeout_seconds,
            "allowed_hosts": latest.allowed_hosts,
            "bearer_token": bool(latest.bearer_token),
            "signing_secret": bool(latest.signing_secret),
        }
    return current


def _apply_version(uow: UnitOfWork, context: ApplyContext, content: dict[str, Any], secrets) -> dict[str, Any]:
    connection = _lock_connection(uow.session, context.installation_id, content["connection_id"])
    previous = _latest(uow.session, connection)
    if (previous.id if previous else None) != content["base_version_id"]:
        raise ApiError(
            409,
            "config_change_stale",
            "The connection has a newer version than the one this change was made against. Propose it again.",
        )
    columns, details = _version_row(content, secrets, previous)
    number = (previous.version if previous else 0) + 1
    version = _add_version(uow, connection, number, columns)
    uow.audit(
        context.installation_id,
        f"admin:connection-version-created:{version.id}",
        "admin.connection_version_created",
        context.actor,
        "connection",
        connection.id,
        context.details({"version_id": version.id, "version": number, **details}),
    )
    return {"connection_id": connection.id, "version_id": version.id, "version": number}


SECRET_SHOWN = {"keep": "kept", "set": "a new one (not shown)", "generate": "a new one (generated)", "none": "none"}


def _display(content: dict[str, Any], current: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The version's settings now and as proposed, secrets named but never shown."""
    current = dict(current or {})
    for name in ("bearer_token", "signing_secret"):
        if name in current:
            current[name] = "set" if current[name] else "not set"
    proposed = {key: content[key] for key in ("base_url", "timeout_seconds", "allowed_hosts")}
    proposed |= {key: content[key] for key in HEALTH_DEFAULTS if key in content}
    for name in ("bearer_token", "signing_secret"):
        action = content[name]
        kept = current.get(name, "kept")  # a decided change has no "now": it kept what there was
        proposed[name] = kept if action == "keep" else SECRET_SHOWN[action]
    return current, proposed


CONNECTION_VERSION = ChangeType(
    kind=ChangeKind.CONNECTION_VERSION,
    subject_type="connection",
    subject=lambda content: content["connection_id"],
    current=_current_version,
    summary=lambda content, current: (
        f"Connection {current['connection']!r}: version {current['version'] + 1} ({content['base_url']})"
    ),
    apply=_apply_version,
    display=_display,
)


def create_connection_version(
    operator: OperatorUser, connection_id: str, settings: ConnectionSettings
) -> ConnectionSaved | PendingChange:
    """Add a version to a connection of the operator's installation, or propose it.

    A version that changes the destination (scheme, host, port, allowed hosts) or a
    secret is a change for a second admin (FOUR-2): it is stored pending, with any
    signing secret generated for it shown once to the proposer. A version whose
    origin differs from the previous one's cannot keep the stored secrets (SEC-4).
    Components keep pointing at the version they were published with; publish a
    component version to use the new connection version.

    Returns:
        What was saved, or the `PendingChange` stored.

    Raises:
        ApiError: 404 ``connection_not_found``; 400 ``connection_url_invalid``,
            ``connection_timeout_invalid``, ``connection_allowed_hosts_invalid``,
            ``connection_bearer_token_invalid``, ``connection_signing_secret_invalid``,
            ``connection_secrets_reentry_required``; 409 ``version_conflict`` when
            another version was saved at the same moment.
    """
    with unit_of_work() as uow:
        connection = _lock_connection(uow.session, operator.installation_id, connection_id)
        previous = _latest(uow.session, connection)
        fields, secrets = _settings_content(settings, previous)
        content = {"connection_id": connection.id, "base_version_id": previous.id if previous else None, **fields}
        generated = {"signing_secret": secrets["signing_secret"]} if "signing_secret" in secrets else {}
        outcome = submit(uow, operator, CONNECTION_VERSION, content, secrets, shown_once=generated)
        uow.commit()
    if isinstance(outcome, PendingChange):
        return outcome
    return ConnectionSaved(
        outcome["connection_id"], outcome["version_id"], outcome["version"], generated.get("signing_secret")
    )


def _add_version(uow: UnitOfWork, connection: Connection, number: int, columns: dict[str, Any]) -> ConnectionVersion:
    version = ConnectionVersion(
        installation_id=connection.installation_id, connection_id=connection.id, version=number, **columns
    )
    uow.session.add(version)
    try:
        uow.session.flush()
    except IntegrityError as error:
        raise ApiError(409, "version_conflict", "Another version was saved at the same moment. Try again.") from error
    return version


def connection_version_choices(installation_id: str) -> list[tuple[str, str]]:
    """(id, label) of every connection version of the installation, for a select."""
    rows = db.session.execute(
        select(ConnectionVersion.id, ConnectionVersion.version, ConnectionVersion.base_url, Connection.name)
        .join(Connection, Connection.id == ConnectionVersion.connection_id)
        .where(ConnectionVersion.installation_id == installation_id)
        .order_by(Connection.name, ConnectionVersion.version.desc())
    ).all()
    return [(row.id, f"{row.name} v{row.version} ({row.base_url})") for row in rows]
