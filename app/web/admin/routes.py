"""Admin views. Each section lives in its own module; this one has the index and
imports the others so their routes register on the blueprint."""

from __future__ import annotations

from flask import render_template

from ..decorators import role_required
from .blueprint import bp
from .common import VIEW_ROLES


@bp.route("/")
@role_required(*VIEW_ROLES)
def index():
    return render_template("admin/index.html")


from . import budgets, components, connections, integrations, labels, users, workflows  # noqa: E402,F401
