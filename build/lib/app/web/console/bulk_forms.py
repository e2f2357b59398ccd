"""The bulk pages' forms (SPEC BULK-1..8); Flask-WTF, so each carries the CSRF token."""

from __future__ import annotations

from typing import Any

from wtforms import HiddenField, RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, Optional

from app.domain.errors import ApiError
from app.web.forms import ConsoleForm

FILTER_FIELDS = ("category", "queue", "target_reference", "author_reference", "received_from", "received_to",
                 "integration")
MAX_UPLOAD_BYTES = 400_000  # parse_subject_list reads at most 200,000 characters


class BulkNewForm(ConsoleForm):
    """Start a bulk action: where its subjects come from, the action and why (BULK-1)."""

    source = RadioField(
        "Subjects from",
        default="list",
        validators=[DataRequired()],
        choices=[
            SelectChoice("list", "A pasted list"),
            SelectChoice("upload", "An uploaded CSV or text file"),
            SelectChoice("reports", "A filter over open reports"),
            SelectChoice("author", "One author's subjects"),
        ],
    )
    subjects = TextAreaField("Subject references (one per line, or CSV with a reference column)",
                             validators=[Optional(), Length(max=200_000)])
    category = StringField("Category", validators=[Optional(), Length(max=500)])
    queue = StringField("Queue (id or slug)", validators=[Optional(), Length(max=500)])
    target_reference = StringField("Target reference", validators=[Optional(), Length(max=500)])
    author_reference = StringField("Author reference", validators=[Optional(), Length(max=500)])
    received_from = StringField("Received from (ISO time with zone)", validators=[Optional(), Length(max=500)])
    received_to = StringField("Received to (ISO time with zone)", validators=[Optional(), Length(max=500)])
    integration = StringField("Reporter integration (id or slug)", validators=[Optional(), Length(max=500)])
    author = StringField("Author reference", validators=[Optional(), Length(max=500)])
    action = SelectField("Action", validators=[DataRequired()], validate_choice=False)
    reason = TextAreaField("Reason (3–5,000 characters)", validators=[Optional(), Length(max=5000)])

    def selection(self, upload: Any) -> dict[str, Any]:
        """The selection `start_dry_run` takes, from the chosen source.

        Args:
            upload: the uploaded file (a werkzeug FileStorage) or None.

        Raises:
            ApiError: 400 ``bulk_file_invalid`` for a missing, too large or non-UTF-8 file.
        """
        source = self.source.data
        if source == "upload":
            data = upload.read(MAX_UPLOAD_BYTES + 1) if upload is not None and upload.filename else b""
            if not data:
                raise ApiError(400, "bulk_file_invalid", "Choose a CSV or text file of subject references.", "file")
            if len(data) > MAX_UPLOAD_BYTES:
                raise ApiError(400, "bulk_file_invalid", "The file is too large; split it into several bulk actions.",
                               "file")
            try:
                return {"source": "list", "text": data.decode("utf-8-sig")}
            except UnicodeDecodeError as error:
                raise ApiError(400, "bulk_file_invalid", "The file is not UTF-8 text.", "file") from error
        if source == "reports":
            return {"source": "reports",
                    "filter": {name: getattr(self, name).data for name in FILTER_FIELDS if getattr(self, name).data}}
        if source == "author":
            return {"source": "author", "author_reference": (self.author.data or "").strip()}
        return {"source": "list", "text": self.subjects.data or ""}

    def action_choice(self) -> tuple[str, str]:
        """(action key, decision code) the chosen option carries: ``key|code``."""
        key, _, code = (self.action.data or "").rpartition("|")
        return key, code


class DigestForm(ConsoleForm):
    """Submit or approve: the digest the operator saw (BULK-2, BULK-3)."""

    digest = HiddenField(validators=[DataRequired(), Length(max=100)])


class RejectForm(DigestForm):
    reason = TextAreaField("Why you reject it", validators=[Optional(), Length(max=5000)])


class ControlForm(DigestForm):
    """Pause or resume: the batch digest of the batch the operator saw (BULK-7)."""


class ReasonForm(ControlForm):
    """Cancel or undo: the batch digest and why (BULK-7, BULK-8)."""

    reason = TextAreaField("Reason", validators=[DataRequired(), Length(min=3, max=5000)])
