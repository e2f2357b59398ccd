"""Sign in and out (Flask-Login)."""

from . import routes, second_factor  # noqa: F401
from .blueprint import bp as bp
