"""Administration: integrations and tokens, connections, components, workflows,
budgets, users. Admins change things; auditors may look."""

from .blueprint import bp

from . import routes  # noqa: F401
