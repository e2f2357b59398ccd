"""Where each role lands after signing in (SPEC QUEUE-5)."""

from __future__ import annotations

from collections.abc import Iterable

# In this order: someone with several roles lands on the work of the first they hold.
# A moderator's queue comes first because it is where new work arrives; a reviewer's
# approvals next (they wait on a maker); an admin's pending changes and connection
# health last. Everyone reaches the others from the menu.
LANDINGS: tuple[tuple[str, str], ...] = (
    ("moderator", "console.queue"),
    ("reviewer", "console.tasks"),
    ("admin", "admin.index"),
)
DEFAULT_LANDING = "console.proposals"  # an auditor reads what was done


def landing_endpoint(roles: Iterable[str]) -> str:
    """The endpoint an operator with `roles` lands on (QUEUE-5).

    Args:
        roles: role names, e.g. ``["reviewer", "moderator"]`` (order does not matter).

    Returns:
        ``console.queue`` for a moderator, else ``console.tasks`` for a reviewer, else
        ``admin.index`` for an admin, else ``console.proposals``.
    """
    held = set(roles)
    return next((endpoint for role, endpoint in LANDINGS if role in held), DEFAULT_LANDING)
