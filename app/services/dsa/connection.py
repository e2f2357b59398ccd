"""The Transparency Database connection of an installation (SPEC §7 DSA-3).

The DSA settings name a connection by its slug (`DsaSettings.tdb_connection`); its
newest `ConnectionVersion` says where statements go and how: the base URL, the
bearer token (sealed at rest, OPS-3), the request timeout, the rate limit (CONN-2)
and the allowed hosts that egress enforces (SEC-2). A connection and its versions
are four-eyes changes (FOUR-4) like every other connection, so no admin alone can
point statements somewhere else.

When no endpoint can be built, nothing is sent and the reason is given in words
(Operations shows it): no connection named, a slug no connection has, no token, or
a token no configured key opens.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.domain.dsa import RATE_LIMIT_PER_SECOND
from app.domain.dsa_settings import DsaSettings
from app.models import Connection, ConnectionVersion
from app.secret_box import UnreadableSecret

from .submission import TdbEndpoint

# code -> words (shown on Operations after "No Transparency Database connection")
PROBLEMS = {
    "tdb_connection_not_set": "the DSA settings name no connection for the Transparency Database.",
    "tdb_connection_not_found": "the DSA settings name a connection that does not exist.",
    "tdb_connection_no_version": "the connection has no settings yet.",
    "tdb_token_missing": "the connection has no API token.",
    "tdb_token_unreadable": "the connection's API token cannot be opened with the configured SECRETS_KEY.",
}
DEFAULT_RATE = RATE_LIMIT_PER_SECOND / 2  # the database allows 200 a second per user: keep a margin


@dataclass(frozen=True)
class EndpointStatus:
    """Where an installation's statements would go now (DSA-3).

    Attributes:
        endpoint: the `TdbEndpoint`, or None when nothing can be sent.
        problem: a code of `PROBLEMS` when `endpoint` is None, else None.
        connection_name: the connection's name, when the slug names one.
        connection_slug: the slug the settings name, if any.
    """

    endpoint: TdbEndpoint | None
    problem: str | None = None
    connection_name: str | None = None
    connection_slug: str | None = None

    @property
    def problem_words(self) -> str | None:
        """Why nothing is sent, in words, or None."""
        return PROBLEMS.get(self.problem) if self.problem else None


def endpoint_status(session, installation_id: str, settings: DsaSettings) -> EndpointStatus:
    """The Transparency Database endpoint of `installation_id` from its connection's
    newest version (DSA-3, OPS-3). One query.

    Args:
        session: a database session (read only).
        installation_id: whose connection.
        settings: the DSA settings in force (`current_settings`).

    Returns:
        The `EndpointStatus`: an endpoint with the version's base URL, token, timeout
        (seconds), rate limit (requests a second; the version's, else 100) and
        allowed hosts, its rate limit shared by every submitter with the token
        (CONN-2); or no endpoint and the
        problem's code. Never raises for a missing or unreadable secret.
    """
    slug = settings.tdb_connection
    if not slug:
        return EndpointStatus(None, "tdb_connection_not_set")
    row = session.execute(
        select(Connection, ConnectionVersion)
        .outerjoin(ConnectionVersion, ConnectionVersion.connection_id == Connection.id)
        .where(Connection.installation_id == installation_id, Connection.slug == slug)
        .order_by(ConnectionVersion.version.desc())
        .limit(1)
    ).first()
    if row is None:
        return EndpointStatus(None, "tdb_connection_not_found", connection_slug=slug)
    connection, version = row
    status = {"connection_name": connection.name, "connection_slug": slug}
    if version is None:
        return EndpointStatus(None, "tdb_connection_no_version", **status)
    token = version.bearer_token
    if isinstance(token, UnreadableSecret):
        return EndpointStatus(None, "tdb_token_unreadable", **status)
    if not token:
        return EndpointStatus(None, "tdb_token_missing", **status)
    endpoint = TdbEndpoint(
        base_url=version.base_url,
        token=token,
        rate_limit_per_second=version.rate_limit_per_second or DEFAULT_RATE,
        timeout_seconds=float(version.timeout_seconds),
        limiter_key=None,
        allowed_hosts=tuple(version.allowed_hosts or ()),
    )
    return EndpointStatus(endpoint, **status)
