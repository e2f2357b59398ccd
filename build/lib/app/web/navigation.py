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
    Section("admin.index", "Admin", "admin."),
)


def navigation() -> list[tuple[Section, bool]]:
    """(section, is current) for each section the signed-in operator may open."""
    endpoint = request.endpoint or ""
    return [(s, endpoint.startswith(s.prefix)) for s in SECTIONS if may_open(s.endpoint)]


def register_navigation(app: Flask) -> None:
    """Make ``navigation()`` available to every template (base.html's menu)."""
    app.jinja_env.globals["navigation"] = navigation
