"""Sign in and out (Flask-Login)."""

from . import routes  # noqa: F401
from .blueprint import bp as bp
