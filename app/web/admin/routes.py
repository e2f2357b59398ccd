from __future__ import annotations

from flask import render_template

from ..decorators import role_required
from . import bp

VIEW_ROLES = ("admin", "auditor")


@bp.route("/")
@role_required(*VIEW_ROLES)
def index():
    return render_template("admin/index.html")
