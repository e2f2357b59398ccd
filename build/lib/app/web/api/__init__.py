"""The JSON API for platforms (bearer tokens of integrations)."""

from . import routes  # noqa: F401
from .blueprint import bp as bp
