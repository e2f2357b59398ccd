from __future__ import annotations

from flask import render_template
from flask_login import current_user

from app.services import readmodels

from ..decorators import role_required
from . import bp

VIEW_ROLES = ("moderator", "reviewer", "admin", "auditor")


@bp.route("/appeals")
@role_required(*VIEW_ROLES)
def appeals():
    return render_template("appeals/list.html", rows=readmodels.list_appeals(current_user))
