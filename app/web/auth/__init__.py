"""Sign in and out (Flask-Login), with a password or through OpenID Connect (OPS-1)."""

from . import routes, second_factor, sso  # noqa: F401
from .blueprint import bp as bp
