from __future__ import annotations

from collections import Counter

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from app.domain.errors import ApiError
from app.domain.proposal.offers import OPERATOR_ROLES, dead_letter_retry_offer
from app.extensions import db
from app.queueing import delivery_queue
from app.services.dsa.requeue import requeue_statement
from app.services.lifecycle.dead_letter_retry import DeadLetterFilter, retry_dead_letters
from app.services.read import connection_status as connection_views
from app.services.read.dsa_statements import statement_in, statements_overview
from app.services.read.emergency_reviews import overdue_rows
from app.services.read.operations import operations_view
from app.services.read.temporary_actions import reversals_due

from ..decorators import role_required
from ..errors import raise_for_json
from .blueprint import bp
from .forms import DeadLetterRetryForm, StatementRequeueForm


def _filter(values) -> DeadLetterFilter:
    """The dead-letter filter of a query string or form (empty: any)."""
    return DeadLetterFilter(
        connection_id=(values.get("connection_id") or "").strip()[:200] or None,
        error_code=(values.get("error_code") or "").strip()[:200] or None,
    )


def _render(where: DeadLetterFilter, form: DeadLetterRetryForm | None = None, error=None, status: int = 200):
    view = operations_view(
        current_user.installation_id,
        delivery_queue(),
        current_app.config["WORKER_TTL_SECONDS"],
        dead_letter_filter=where,
    )
    dead = view.dead_letters
    # A fresh form per rendering: its own idempotency key and the digest of this list.
    retry_form = DeadLetterRetryForm(
        formdata=None, connection_id=where.connection_id, error_code=where.error_code, list_digest=dead.digest
    )
    installation_id = current_user.installation_id
    soon, overdue = reversals_due(installation_id)  # TEMP-2
    return render_template(
        "operations/index.html",
        v=view,
        reversals_soon=soon,
        reversals_overdue=overdue,
        emergency_overdue=overdue_rows(installation_id),  # POL-6
        connections=connection_views.health_views(db.session, installation_id),  # CONN-1, CONN-3
        connection_history=connection_views.history(db.session, installation_id),
        dead=dead,
        retry_form=retry_form,
        retry_offer=dead_letter_retry_offer(current_user.roles),  # RTRY-1, CONN-4
        statements=statements_overview(db.session, installation_id),  # DSA-3
        requeue_form=StatementRequeueForm(formdata=None) if current_user.has_role("admin") else None,
        error=error,
    ), status


@bp.route("/operations")
@role_required("admin", "reviewer", "auditor")
def operations():
    return _render(_filter(request.args))


@bp.route("/operations/dead-letters/retry", methods=["POST"])
@role_required(*OPERATOR_ROLES)
def retry_dead_letters_view():
    """Retry the ticked dead letters, or every listed one, confirmed by the list's digest (CONN-4)."""
    form = DeadLetterRetryForm()
    where = _filter(request.form)
    if not form.validate():
        error = ApiError(400, "form_invalid", "Reload the page and try again.")
        raise_for_json(error)
        return _render(where, error=error, status=400)
    everything = request.form.get("scope") == "all"
    try:
        result = retry_dead_letters(
            current_user,
            where=where,
            list_digest=form.list_digest.data,
            idempotency_key=form.idempotency_key.data,
            proposal_ids=None if everything else request.form.getlist("proposal_ids"),
        )
    except ApiError as error:
        raise_for_json(error)
        return _render(where, error=error, status=error.status)
    message = f"Retry requested for {len(result.retried)} failed deliver{'y' if len(result.retried) == 1 else 'ies'}"
    message += ", each in its own new delivery cycle."
    if result.refused:
        reasons = ", ".join(f"{code} ({count})" for code, count in sorted(Counter(result.refused.values()).items()))
        message += f" {len(result.refused)} could not be retried and stay listed: {reasons}."
    flash(message, "ok")
    return redirect(url_for("console.operations", **{k: v for k, v in where.as_dict().items() if v}), code=303)


@bp.get("/operations/dead-letters/retry")
@role_required("admin", "reviewer", "auditor")
def retry_dead_letters_reloaded():
    """A reload of a refused retry's page shows Operations, not 405."""
    return redirect(url_for("console.operations"), code=303)


@bp.route("/operations/statements/<statement_id>/requeue", methods=["POST"])
@role_required("admin")
def requeue_statement_view(statement_id: str):
    """Send a refused statement of reasons again, as it was built (DSA-3)."""
    # CSRF is checked for every POST; the service checks the key after the statement.
    # The key is the one posted (the form's default would make up a new one).
    try:
        result = requeue_statement(current_user, statement_id, request.form.get("idempotency_key", ""))
    except ApiError as error:
        raise_for_json(error)
        return _render(DeadLetterFilter(), error=error, status=error.status)
    flash(f"Statement {result.puid} is queued again; the next sweep sends it as it was built.", "ok")
    return redirect(url_for("console.operations", _anchor="statements-h"), code=303)


@bp.get("/operations/statements/<statement_id>/requeue")
@role_required("admin")
def requeue_statement_reloaded(statement_id: str):
    """A reload of a refused requeue's page shows Operations, not 405 (another
    installation's statement: 404)."""
    if statement_in(db.session, current_user.installation_id, statement_id) is None:
        abort(404)
    return redirect(url_for("console.operations", _anchor="statements-h"), code=303)
