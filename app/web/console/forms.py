"""Console forms (Flask-WTF: every one carries the CSRF token)."""

import secrets

from wtforms import HiddenField, IntegerField, RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, NumberRange, Optional

from app.web.forms import ConsoleForm


def new_key() -> str:
    return secrets.token_urlsafe(16)


class DecisionForm(ConsoleForm):
    """Approve or reject a proposal, confirming the digest that was reviewed."""

    decision = RadioField(
        "Decision",
        choices=[SelectChoice("approved", "Approve"), SelectChoice("rejected", "Reject")],
        validators=[DataRequired()],
    )
    payload_digest = StringField("Payload digest you reviewed", validators=[DataRequired(), Length(max=100)])
    reason = TextAreaField("Reason (optional, 3–2,000 characters)", validators=[Optional(), Length(max=2000)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class RetryForm(ConsoleForm):
    payload_digest = HiddenField(validators=[DataRequired(), Length(max=100)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class ReportDecisionForm(ConsoleForm):
    # The page sends one per rendering, so a double-submitted form records one decision.
    idempotency_key = HiddenField(validators=[Optional(), Length(max=200)], default=new_key)
    decision_code = SelectField(
        "Decision",
        validators=[DataRequired()],
        choices=[
            SelectChoice("remove_content", "Remove content"),
            SelectChoice("restrict_account", "Restrict account"),
            SelectChoice("suspend_account", "Suspend the author for a while"),
            SelectChoice("no_violation", "No violation"),
        ],
    )
    rationale = TextAreaField("Rationale", validators=[Optional(), Length(max=5000)])


class EmptyForm(ConsoleForm):
    """A POST-only button: carries nothing but the CSRF token."""


class RetryNowForm(ConsoleForm):
    """"Retry now" (QUEUE-6): one key per rendered page, so a double submit retries once."""

    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class AppealForm(ConsoleForm):
    statement = TextAreaField("Appellant's statement", validators=[Optional(), Length(max=5000)])


class AppealDecisionForm(ConsoleForm):
    outcome = RadioField(
        "Outcome",
        validators=[DataRequired()],
        choices=[
            SelectChoice("upheld", "Upheld (the decision stands)"),
            SelectChoice("modified", "Modified (correct the enforcement)"),
            SelectChoice("reversed", "Reversed (undo the enforcement)"),
        ],
    )
    rationale = TextAreaField("Rationale", validators=[Optional(), Length(max=5000)])


class ManualCorrectionForm(ConsoleForm):
    note = TextAreaField("What was done by hand", validators=[DataRequired(), Length(max=2000)])


class CompensationForm(ConsoleForm):
    """Propose an action that undoes an applied one (COMP)."""

    component_version_id = SelectField("Compensating component", validators=[DataRequired()], choices=[])
    action_code = StringField("Action code", validators=[DataRequired(), Length(max=200)])
    target = TextAreaField("Target (JSON)", validators=[DataRequired(), Length(max=20000)])
    payload = TextAreaField("Payload (JSON)", validators=[DataRequired(), Length(max=20000)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class TemporaryChangeForm(ConsoleForm):
    """End a temporary action now, or extend it (TEMP-3); a second person approves."""

    kind = HiddenField(validators=[DataRequired(), Length(max=20)])
    extend_minutes = IntegerField("Extend by (minutes)", validators=[Optional(), NumberRange(min=1, max=527_040)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class DeadLetterRetryForm(ConsoleForm):
    """Retry dead letters in bulk: the filter the page listed, the digest of exactly
    what it listed, and one idempotency key per rendering (CONN-4). The ticked
    proposals come as repeated ``proposal_ids`` fields."""

    connection_id = HiddenField(validators=[Optional(), Length(max=200)])
    error_code = HiddenField(validators=[Optional(), Length(max=200)])
    list_digest = HiddenField(validators=[DataRequired(), Length(max=100)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=100)], default=new_key)


class StatementRequeueForm(ConsoleForm):
    """Requeue a refused statement of reasons (DSA-3): one key per rendered page,
    taken per statement, so a double submit requeues once."""

    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=100)], default=new_key)
