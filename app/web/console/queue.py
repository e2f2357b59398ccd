"""The moderator's queue (SPEC QUEUE): subjects to work through, filtered and paged."""

from __future__ import annotations

from flask import render_template, request
from flask_login import current_user

from app.domain.queue import parse_filter
from app.services.read.queue_pages import queue_page

from ..decorators import role_required
from .blueprint import bp

QUEUE_ROLES = ("moderator", "reviewer", "admin", "auditor")


@bp.route("/queue")
@role_required(*QUEUE_ROLES)
def queue():
    wanted = parse_filter(request.args)
    page = queue_page(current_user, wanted, request.args.get("cursor"))
    return render_template("queue/list.html", page=page, wanted=wanted)
