"""What every admin view shares: who may look, who may change, and how a refusal
is shown on the page the form came from."""

from __future__ import annotations

from flask_wtf import FlaskForm

from app.domain.errors import ApiError

VIEW_ROLES = ("admin", "auditor")  # auditors see every admin page, read-only
EDIT_ROLES = ("admin",)


def form_invalid() -> ApiError:
    """The form could not be read (a field the page never sends, or too long)."""
    return ApiError(400, "form_invalid", "The form could not be read. Reload the page and try again.")


def raise_if_not_found(error: ApiError) -> None:
    """An id in the URL that is not this installation's (404) is not a form problem:
    raise it again, to be answered as a 404 page."""
    if error.status == 404 and not error.field:
        raise error


def refused(form: FlaskForm, error: ApiError) -> FlaskForm:
    """Show a service's refusal next to the field at fault, keeping what was typed
    (404 for an id in the URL: see `raise_if_not_found`)."""
    raise_if_not_found(error)
    if error.field and error.field in form:
        form[error.field].errors = [*form[error.field].errors, error.message]
    return form
