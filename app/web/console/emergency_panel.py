"""The proposal page's emergency panel (SPEC POL-6): the "Act now" form, the
retrospective review form, and what the signed-in operator may do with them. Apart
from the emergency views so that the proposal page and those views each import it,
not each other."""

from __future__ import annotations

from flask_login import current_user
from wtforms import HiddenField, RadioField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length

from app.domain import emergency_action as rules
from app.services.read import emergency_reviews as reads
from app.web.forms import ConsoleForm

from .blueprint import bp
from .forms import new_key


class EmergencyForm(ConsoleForm):
    """Act alone in an emergency: the digest seen and a reason of substance (POL-6)."""

    payload_digest = StringField("Payload digest you reviewed", validators=[DataRequired(), Length(max=100)])
    reason = TextAreaField(
        f"Why this cannot wait (at least {rules.MIN_REASON_CHARACTERS} characters, {rules.MIN_REASON_WORDS} words)",
        validators=[Length(max=rules.MAX_REASON_CHARACTERS)],
    )
    idempotency_key = HiddenField(validators=[DataRequired(), Length(max=200)], default=new_key)


class EmergencyReviewForm(ConsoleForm):
    """The retrospective review: agree, or disagree and propose the compensation (POL-6)."""

    verdict = RadioField(
        "Your review",
        choices=[
            SelectChoice("agree", "Agree: acting at once was right"),
            SelectChoice("disagree", "Disagree: propose the compensation that undoes it"),
        ],
        validators=[DataRequired()],
    )
    reason = TextAreaField("Reason (3–2,000 characters)", validators=[Length(max=2000)])


def emergency_panel_for(p) -> dict:
    """The proposal page's emergency panel and its forms, for the signed-in operator."""
    panel = reads.emergency_panel(current_user, p)
    return {
        "panel": panel,
        "act_form": EmergencyForm(formdata=None) if panel.can_act else None,
        "review_form": EmergencyReviewForm(formdata=None) if panel.can_review else None,
    }


bp.add_app_template_global(emergency_panel_for, "emergency_panel_for")
