"""A connection version's settings as typed into the admin form, checked, and turned
into the version's columns (SPEC SEC-2, SEC-4, CONN-1..3): base URL, allowed hosts,
timeout, breaker, failure window, rate limit, and what happens to each secret.

A change's content names what happens to each secret (``keep``, ``set`` /
``generate``, ``none``) and holds only the digests of new ones; the values wait in
the change's secrets until it applies. Secrets stored for one origin are never kept
for another (SEC-4). The change kinds are in `app.services.admin.connections` and
`app.services.admin.connection_create`.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from dataclasses import dataclass
from secrets import token_bytes
from typing import Any
from urllib.parse import urlsplit

from app.domain.config_changes import origin_text, secrets_need_reentry
from app.domain.errors import ApiError
from app.models import ConnectionVersion
from app.models.components import MAX_CONNECTION_TIMEOUT_SECONDS
from app.services.admin.changes import secret_digests
from app.services.admin.input import parse_number

# What the form may say to do with each secret (``keep``: the previous version's).
SECRET_ACTIONS = {"bearer_token": ("keep", "set", "none"), "signing_secret": ("keep", "generate", "none")}
SECRET_NAMES = tuple(SECRET_ACTIONS)
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


def _secret_action(settings: ConnectionSettings, name: str, first_version: bool) -> str:
    """What the form says to do with a secret (`SECRET_ACTIONS`); a first version has
    nothing to keep.

    Raises:
        ApiError: 400 ``connection_<name>_invalid`` on ``<name>_action``.
    """
    allowed = tuple(action for action in SECRET_ACTIONS[name] if not (first_version and action == "keep"))
    action = getattr(settings, f"{name}_action")
    if action not in allowed:
        message = f"Choose what to do with the {name.replace('_', ' ')}: " + ", ".join(allowed) + "."
        raise ApiError(400, f"connection_{name}_invalid", message, f"{name}_action")
    return action


def settings_content(
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
    bearer_action = _secret_action(settings, "bearer_token", previous is None)
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
    signing_action = _secret_action(settings, "signing_secret", previous is None)
    refuse_secrets_to_new_origin(previous, base_url, bearer_action, signing_action)
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


def version_row(
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
    refuse_secrets_to_new_origin(previous, content["base_url"], bearer_action, signing_action)
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


def refuse_secrets_to_new_origin(
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


SECRET_SHOWN = {"keep": "kept", "set": "a new one (not shown)", "generate": "a new one (generated)", "none": "none"}


def proposed_settings(content: dict[str, Any], now: dict[str, Any] | None = None) -> dict[str, Any]:
    """A version's settings as the change page shows them: secrets named, never shown.

    Args:
        content: the change's content (`settings_content`).
        now: the settings now as the page shows them (``set`` / ``not set`` for each
            secret), for a kept secret; without it (a decided change has no "now")
            a kept secret shows as ``kept``.
    """
    proposed = {key: content[key] for key in ("base_url", "timeout_seconds", "allowed_hosts")}
    proposed |= {key: content[key] for key in HEALTH_DEFAULTS if key in content}
    for name in SECRET_NAMES:
        action = content[name]
        proposed[name] = (now or {}).get(name, SECRET_SHOWN[action]) if action == "keep" else SECRET_SHOWN[action]
    return proposed


def shown_once(secrets: dict[str, str]) -> dict[str, str]:
    """Of a change's new secrets, the one the proposer sees once: a generated signing secret."""
    return {"signing_secret": secrets["signing_secret"]} if "signing_secret" in secrets else {}
