"""The console's main navigation: only the sections the operator's roles open (REV-5).

Each section is shown when its view's own `role_required` lets the operator in, so
the menu and the permission check cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, request

from .decorators import may_open


@dataclass(frozen=True)
class Section:
    endpoint: str
    label: str
    prefix: str  # endpoints starting with it mark the section current


SECTIONS = (
    Section("console.queue", "Queue", "console.queue"),
    Section("console.proposals", "Proposals", "console.proposal"),
    Section("console.tasks", "Approval tasks", "console.tasks"),
    Section("console.reports", "Reports", "console.report"),
    Section("console.appeals", "Appeals", "console.appeal"),
    Section("console.bulk_list", "Bulk", "console.bulk"),
    Section("console.operations", "Operations", "console.operations"),
    Section("console.transparency", "Transparency", "console.transparency"),
    Section("admin.index", "Admin", "admin."),
)


def navigation() -> list[tuple[Section, bool]]:
    """(section, is current) for each section the signed-in operator may open."""
    endpoint = request.endpoint or ""
    return [(s, endpoint.startswith(s.prefix)) for s in SECTIONS if may_open(s.endpoint)]


def inbox_count() -> int:
    """How many proposals wait for the signed-in operator's approval (POL-7): the
    navigation's badge, one query per page (cached for the request)."""
    from flask_login import current_user

    from app.services.approval_inbox import awaiting_count

    if not current_user or not current_user.is_authenticated:
        return 0
    cache = request.environ  # per request (tests share one app context, so not g)
    if "console.inbox_count" not in cache:
        cache["console.inbox_count"] = awaiting_count(current_user._get_current_object())
    return cache["console.inbox_count"]


def know_inbox_count(count: int) -> None:
    """The navigation's count, known already: the inbox page counted its own rows."""
    request.environ["console.inbox_count"] = count


def register_navigation(app: Flask) -> None:
    """Make ``navigation()`` and ``inbox_count()`` available to every template (base.html's menu)."""
    app.jinja_env.globals["navigation"] = navigation
    app.jinja_env.globals["inbox_count"] = inbox_count
