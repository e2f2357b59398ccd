"""The JSON API for platforms (bearer tokens of integrations)."""

from .blueprint import bp

from . import routes  # noqa: F401
