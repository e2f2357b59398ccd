"""Admin views. Each section lives in its own module; this one has the index and
imports the others so their routes register on the blueprint."""

from __future__ import annotations

from flask import render_template
from flask_login import current_user

from app.extensions import db
from app.services.admin.reviews import pending_count
from app.services.read import connection_status as connection_views

from ..decorators import role_required
from .blueprint import bp
from .common import VIEW_ROLES


@bp.route("/")
@role_required(*VIEW_ROLES)
def index():
    installation_id = current_user.installation_id
    return render_template("admin/index.html", pending_changes=pending_count(installation_id),
                           connections=connection_views.health_views(db.session, installation_id))  # QUEUE-5


from . import budgets, bulk_caps, changes, components, connections, integrations, labels  # noqa: E402,F401
from . import approvals, dsa, erasure, protected, queues, sso, users, workflows  # noqa: E402,F401
