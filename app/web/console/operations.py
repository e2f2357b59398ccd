from __future__ import annotations

from flask import current_app, render_template
from flask_login import current_user

from app.extensions import db
from app.queueing import delivery_queue
from app.services.lifecycle import connection_health
from app.services.read.operations import operations_view
from app.services.read.temporary import reversals_due

from ..decorators import role_required
from .blueprint import bp


@bp.route("/operations")
@role_required("admin", "reviewer", "auditor")
def operations():
    view = operations_view(current_user.installation_id, delivery_queue(), current_app.config["WORKER_TTL_SECONDS"])
    installation_id = current_user.installation_id
    soon, overdue = reversals_due(installation_id)  # TEMP-2
    return render_template(
        "operations/index.html",
        v=view,
        reversals_soon=soon,
        reversals_overdue=overdue,
        connections=connection_health.health_views(db.session, installation_id),  # CONN-1, CONN-3
        connection_history=connection_health.history(db.session, installation_id),
    )
