from __future__ import annotations

from flask import redirect, render_template, request, url_for
from flask_login import current_user

from app.services.cases.tasks import claim_task, release_task
from app.services.read import review as reviews
from app.services.read import task_list
from app.services.read.approving import approving
from app.web.labels import label

from ..decorators import is_htmx, role_required
from .blueprint import bp
from .forms import EmptyForm


@bp.route("/tasks")
@role_required("reviewer", "admin", "auditor")
def tasks():
    page = task_list.task_page(current_user, request.args.get("after"))
    rows = page.rows
    return render_template(
        "tasks/list.html",
        rows=rows,
        total=page.total,
        next_url=url_for("console.tasks", after=page.next_cursor) if page.next_cursor else None,
        form=EmptyForm(),
        reviews=reviews.task_reviews(current_user, rows),
        approving=approving([row["proposal"] for row in rows], label),  # FOUR-5
    )


def _answer(task_id: str):
    """htmx: the task's row, re-rendered in place; otherwise back to the list."""
    if is_htmx():
        row = task_list.open_task(current_user, task_id)
        return render_template(
            "tasks/_row.html",
            row=row,
            form=EmptyForm(),
            reviews=reviews.task_reviews(current_user, [row]),
            approving=approving([row["proposal"]] if row else [], label),  # FOUR-5
        )
    return redirect(url_for("console.tasks"), code=303)


@bp.route("/tasks/<path:task_id>/claim", methods=["POST"])
@role_required("reviewer")
def claim(task_id: str):
    claim_task(task_id, current_user)  # refuses a maker: 403 maker_checker_violation (FOUR-1)
    return _answer(task_id)


@bp.route("/tasks/<path:task_id>/release", methods=["POST"])
@role_required("reviewer")
def release(task_id: str):
    release_task(task_id, current_user)
    return _answer(task_id)
