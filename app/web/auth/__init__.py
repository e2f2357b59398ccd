"""Sign in and out (Flask-Login)."""

from .blueprint import bp

from . import routes  # noqa: F401
