"""Console forms (Flask-WTF: every one carries the CSRF token)."""

import secrets

from flask_wtf import FlaskForm
from wtforms import HiddenField, RadioField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length, Optional


def new_key() -> str:
    return secrets.token_urlsafe(16)


class DecisionForm(FlaskForm):
    """Approve or reject a proposal, confirming the digest that was reviewed."""

    decision = RadioField(
        "Decision",
        choices=[SelectChoice("approved", "Approve"), SelectChoice("rejected", "Reject")],
        validators=[DataRequired()],
    )
    payload_digest = StringField("Payload digest you reviewed", validators=[DataRequired(), Length(max=100)])
    reason = TextAreaField("Reason (optional, 3–2,000 characters)", validators=[Optional(), Length(max=2000)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class RetryForm(FlaskForm):
    payload_digest = HiddenField(validators=[DataRequired(), Length(max=100)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class ReportDecisionForm(FlaskForm):
    decision_code = SelectField(
        "Decision",
        validators=[DataRequired()],
        choices=[
            SelectChoice("remove_content", "Remove content"),
            SelectChoice("restrict_account", "Restrict account"),
            SelectChoice("no_violation", "No violation"),
        ],
    )
    rationale = TextAreaField("Rationale", validators=[Optional(), Length(max=5000)])


class EmptyForm(FlaskForm):
    """A POST-only button: carries nothing but the CSRF token."""


class AppealForm(FlaskForm):
    statement = TextAreaField("Appellant's statement", validators=[Optional(), Length(max=5000)])


class AppealDecisionForm(FlaskForm):
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


class ManualCorrectionForm(FlaskForm):
    note = TextAreaField("What was done by hand", validators=[DataRequired(), Length(max=2000)])


class CompensationForm(FlaskForm):
    """Propose an action that undoes an applied one (COMP)."""

    component_version_id = SelectField("Compensating component", validators=[DataRequired()], choices=[])
    action_code = StringField("Action code", validators=[DataRequired(), Length(max=200)])
    target = TextAreaField("Target (JSON)", validators=[DataRequired(), Length(max=20000)])
    payload = TextAreaField("Payload (JSON)", validators=[DataRequired(), Length(max=20000)])
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)
