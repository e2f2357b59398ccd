"""Signing in through OpenID Connect (SPEC OPS-1): the "Sign in with …" button sends
the browser to the identity provider (authorization code flow with state, nonce and
PKCE S256, all Authlib's), and the callback lets Authlib exchange the code and verify
the ID token (signature from the provider's JWKS, issuer, audience, nonce, expiry)
before `app.services.sso_sign_in.sign_in` maps the groups to roles.

The provider is reached with Authlib's own `requests` session, not `app.egress`:
egress guards the addresses admins type into the console (platform connections,
where SSRF is the risk); the issuer is infrastructure the server's operator sets in
the environment (``OIDC_ISSUER``), so ``EGRESS_ALLOW_PRIVATE`` does not apply to it
and an IdP on a private network (or loopback, in the tests) just works.

Every refusal is the sign-in page with an error code and a sentence, never a 500.
"""

from __future__ import annotations

import requests
from authlib.integrations.base_client.errors import MismatchingStateError, OAuthError
from authlib.integrations.flask_client import OAuth
from joserfc.errors import JoseError
from flask import current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_user

from app.domain.errors import ApiError
from app.extensions import limiter
from app.services import sso_sign_in as service

from .blueprint import bp
from .forms import LoginForm

TIMEOUT_SECONDS = 10
EXTENSION = "console_sso"


def sso_enabled() -> bool:
    """Whether single sign-on is configured: issuer, client id and client secret all set."""
    config = current_app.config
    return bool(config.get("OIDC_ISSUER") and config.get("OIDC_CLIENT_ID") and config.get("OIDC_CLIENT_SECRET"))


def callback_url() -> str:
    """The redirect URI registered at the provider: on ``PUBLIC_URL`` when it is set
    (the console's address whatever Host a request names, as for invitation links),
    else on the request's own address."""
    public = current_app.config.get("PUBLIC_URL")
    if public:
        return public.rstrip("/") + url_for("auth.sso_callback")
    return url_for("auth.sso_callback", _external=True)


def _client():
    """Authlib's client for the configured provider, made on first use and remade when
    the settings change (tests set them after the app is created)."""
    config = current_app.config
    settings = (config["OIDC_ISSUER"].rstrip("/"), config["OIDC_CLIENT_ID"], config["OIDC_CLIENT_SECRET"])
    made = current_app.extensions.get(EXTENSION)
    if made is None or made[0] != settings:
        oauth = OAuth()
        oauth.init_app(current_app)
        client = oauth.register(
            "idp",
            client_id=settings[1],
            client_secret=settings[2],
            server_metadata_url=f"{settings[0]}/.well-known/openid-configuration",
            client_kwargs={"scope": "openid email profile", "code_challenge_method": "S256",
                           "default_timeout": TIMEOUT_SECONDS},
        )
        made = current_app.extensions[EXTENSION] = (settings, client)
    return made[1]


def _refused(error: ApiError):
    """The sign-in page with the refusal's code and message."""
    form = LoginForm(formdata=None)
    return render_template("auth/login.html", form=form, error=None, sso_error=error), error.status


def _unavailable(error: Exception) -> ApiError:
    current_app.logger.warning("identity provider unreachable", extra={"error": type(error).__name__})
    return ApiError(
        503,
        "sso_unavailable",
        "The identity provider could not be reached or gave an answer the console cannot read. "
        "Try again in a minute, or sign in with a password if your account has one.",
    )


@bp.route("/login/sso")
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"])
def sso_start():
    """Send the browser to the identity provider (OPS-1); 404 ``sso_not_configured`` when off."""
    if not sso_enabled():
        raise ApiError(404, "sso_not_configured", "Single sign-on is not configured on this console.")
    if current_user.is_authenticated:
        return redirect(url_for("console.index"))
    try:
        return _client().authorize_redirect(callback_url())
    except (requests.RequestException, ValueError, OAuthError) as error:
        return _refused(_unavailable(error))


# The callback's ``error`` values of RFC 6749 §4.1.2.1 and OpenID Connect Core §3.1.2.6.
OAUTH_ERROR_CODES = frozenset({
    "invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type", "invalid_scope",
    "server_error", "temporarily_unavailable", "interaction_required", "login_required",
    "account_selection_required", "consent_required", "invalid_request_uri", "invalid_request_object",
    "request_not_supported", "request_uri_not_supported", "registration_not_supported",
})


def _verified_claims() -> dict:
    """The ID token's claims, verified by Authlib; raises `ApiError` for each way it fails."""
    if request.args.get("error"):
        # Anyone can link here with any text: only an error code of the standards is named,
        # and the IdP's free-text description is never shown on the console's page.
        code = request.args["error"]
        named = f" ({code})" if code in OAUTH_ERROR_CODES else ""
        raise ApiError(401, "sso_idp_refused", f"The identity provider did not sign you in{named}. Sign in again.")
    issuer = current_app.config["OIDC_ISSUER"].rstrip("/")
    try:
        token = _client().authorize_access_token(claims_options={"iss": {"essential": True, "values": [issuer]}})
    except MismatchingStateError as error:
        raise ApiError(
            400,
            "sso_state_invalid",
            "This sign-in link is not the one this browser started, or it was used already. Sign in again.",
        ) from error
    except OAuthError as error:  # the token endpoint refused the code
        message = "The identity provider refused the sign-in code. Sign in again."
        raise ApiError(401, "sso_token_refused", message) from error
    except JoseError as error:
        raise ApiError(401, "sso_id_token_invalid", "The identity provider's ID token did not verify.") from error
    except (requests.RequestException, ValueError) as error:
        raise _unavailable(error) from error
    if not token.get("userinfo"):
        raise ApiError(401, "sso_id_token_invalid", "The identity provider sent no ID token.")
    return dict(token["userinfo"])


@bp.route("/login/sso/callback")
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"])
def sso_callback():
    """Where the identity provider sends the browser back (OPS-1): verify, map the
    groups to roles, sign in; or the sign-in page with the refusal's code."""
    if not sso_enabled():
        raise ApiError(404, "sso_not_configured", "Single sign-on is not configured on this console.")
    try:
        claims = _verified_claims()
        operator = service.sign_in(
            current_app.config["OIDC_ISSUER"].rstrip("/"),
            claims,
            groups_claim=current_app.config["OIDC_GROUPS_CLAIM"],
            installation_slug=current_app.config.get("OIDC_INSTALLATION"),
        )
    except ApiError as error:
        return _refused(error)
    login_user(operator)
    return redirect(url_for("console.index"), code=303)


@bp.app_context_processor
def _sso_button() -> dict:
    """The sign-in page's button: its label when single sign-on is on, else None."""
    return {"sso_label": current_app.config.get("OIDC_BUTTON_LABEL") if sso_enabled() else None}
