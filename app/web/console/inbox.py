"""The approver's inbox: what waits for the signed-in operator's approval (SPEC POL-7)."""

from __future__ import annotations

from flask import render_template
from flask_login import current_user

from app.domain.approval_policy import policies_of
from app.domain.clock import utcnow
from app.services import approval_inbox
from app.services.approval_inbox import awaiting
from app.web.badges import age
from app.web.navigation import know_inbox_count

from ..decorators import role_required
from .blueprint import bp


@bp.route("/inbox")
@role_required()  # any operator: a policy's factor may admit any role (POL-1)
def inbox():
    now = utcnow()
    rows = awaiting(current_user, now)
    know_inbox_count(len(rows))  # the navigation's badge, exact here
    waited = {p.id: age(max(int((now - p.created_at).total_seconds()), 0)) for p in rows}
    policies = {p.id: " or ".join(policy.label for policy in policies_of(p.approval_route)) for p in rows}
    return render_template("inbox/list.html", rows=rows, waited=waited, policies=policies, limit=approval_inbox.INBOX_LIMIT)
