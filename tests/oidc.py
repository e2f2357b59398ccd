"""A real OpenID Connect provider on loopback for the SSO tests (OPS-1):
oidc-provider-mock 0.3.4 served on a free port, with helpers to sign a user in at it
and to change a user's claims (their groups) between sign-ins."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from oidc_provider_mock import User, run_server_in_thread

CLIENT_ID = "console-test"
CLIENT_SECRET = "console-test-secret"


@dataclass
class Provider:
    """The running provider: its issuer URL (``http://localhost:<port>``)."""

    issuer: str

    def set_user(self, sub: str, **claims) -> None:
        """Store (or replace) a user's claims at the provider: the next ID token carries them."""
        response = requests.put(f"{self.issuer}/users/{sub}", json=claims, timeout=10)
        assert response.status_code == 204, response.text

    def configure(self, app) -> None:
        """Point the console's SSO settings at this provider."""
        app.config.update(OIDC_ISSUER=self.issuer, OIDC_CLIENT_ID=CLIENT_ID, OIDC_CLIENT_SECRET=CLIENT_SECRET,
                          OIDC_GROUPS_CLAIM="groups", OIDC_BUTTON_LABEL="Example IdP")

    def authorize(self, authorize_url: str, sub: str | None = None, deny: bool = False) -> str:
        """Do what the user does on the provider's page (pick the subject, or deny);
        returns the console callback URL the provider redirects to."""
        data = {"action": "deny"} if deny else {"sub": sub}
        response = requests.post(authorize_url, data=data, allow_redirects=False, timeout=10)
        assert response.status_code == 302, response.text[:1000]
        return response.headers["Location"]


@contextlib.contextmanager
def running_provider(users: dict[str, dict] | None = None) -> Iterator[Provider]:
    """The provider on a free loopback port until the block ends, with `users` (sub → claims)."""
    user_claims = [User(sub=sub, claims=claims) for sub, claims in (users or {}).items()]
    with run_server_in_thread(port=0, user_claims=user_claims) as server:
        yield Provider(f"http://localhost:{server.server_port}")


def path_of(url: str) -> str:
    """A callback URL as the Flask test client takes it: path and query."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def sso_sign_in(client, provider: Provider, sub: str):
    """The whole flow through the test client and the real provider; the console's last answer."""
    start = client.get("/login/sso")
    assert start.status_code == 302, start.get_data(as_text=True)[:1000]
    assert re.match(re.escape(provider.issuer) + r"/oauth2/authorize\?", start.headers["Location"])
    return client.get(path_of(provider.authorize(start.headers["Location"], sub)))
