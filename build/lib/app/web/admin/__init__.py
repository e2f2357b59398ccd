"""Administration: integrations and tokens, connections, components, workflows,
budgets, users. Admins change things; auditors may look."""

from . import routes  # noqa: F401
from .blueprint import bp as bp
