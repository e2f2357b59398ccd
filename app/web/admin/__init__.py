"""Administration: integrations and tokens, connections, components, workflows,
budgets, users. Admins change things; auditors may look."""

from flask import Blueprint

bp = Blueprint("admin", __name__)

from . import routes  # noqa: E402,F401
