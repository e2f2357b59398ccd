"""Admin forms (Flask-WTF: every one carries the CSRF token).

Fields are parsed here and checked by the services, which name the error code of
each refusal; choice fields do not validate their choices for the same reason.
"""

from __future__ import annotations

from wtforms import (
    BooleanField,
    EmailField,
    PasswordField,
    SelectField,
    SelectMultipleField,
    StringField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import Length
from wtforms.widgets import CheckboxInput, ListWidget

from app.models.components import IMPLEMENTATION_KINDS
from app.models.tenancy import ROLES
from app.models.workflows import AUTHORITY_MODES
from app.web.forms import ConsoleForm


class ActionForm(ConsoleForm):
    """A POST-only button: carries nothing but the CSRF token."""


class IntegrationForm(ConsoleForm):
    name = StringField("Name")
    slug = StringField("Slug", description="Lowercase letters, digits and hyphens, unique here.")
    default_queue_id = SelectField("Default queue", validate_choice=False)


class MultiCheckboxField(SelectMultipleField):
    widget = ListWidget(prefix_label=False)
    option_widget = CheckboxInput()


class TokenForm(ConsoleForm):
    label = StringField("Label (what the token is for, optional)")
    # FOUR-8: the tokens of this integration a rotation replaces (choices set by the view)
    succeeds = MultiCheckboxField(
        "Succeeds (a rotation: the new token may confirm actions sent under these)", validate_choice=False
    )


BEARER_CHOICES_NEW = [SelectChoice("none", "No bearer token"), SelectChoice("set", "Use the token entered below")]
BEARER_CHOICES_VERSION = [SelectChoice("keep", "Keep the current bearer token")] + [
    SelectChoice("set", "Replace it with the token entered below"),
    SelectChoice("none", "Remove it (no bearer token)"),
]
SIGNING_CHOICES_NEW = [
    SelectChoice("generate", "Generate a new signing secret (shown once)"),
    SelectChoice("none", "Do not sign requests"),
]
SIGNING_CHOICES_VERSION = [
    SelectChoice("keep", "Keep the current signing secret"),
    SelectChoice("generate", "Generate a new signing secret (shown once)"),
    SelectChoice("none", "Remove it (do not sign requests)"),
]


class ConnectionVersionForm(ConsoleForm):
    base_url = StringField("Base URL", description="http:// or https://, e.g. https://api.example.com")
    bearer_token_action = SelectField("Bearer token", choices=BEARER_CHOICES_VERSION, validate_choice=False)
    bearer_token = PasswordField(
        "New bearer token",
        description="Sent as Authorization: Bearer. For an AT Protocol PDS (atproto_pds components) enter the PDS "
        "admin password: it is sent as Basic admin:<password>. Never shown again.",
    )
    signing_secret_action = SelectField("Signing secret", choices=SIGNING_CHOICES_VERSION, validate_choice=False)
    timeout_seconds = StringField("Timeout (seconds, 1–120)", default="30")
    allowed_hosts = TextAreaField(
        "Allowed hosts",
        description="Host names or IP addresses, one per line or comma-separated; include the base URL's host.",
    )
    # CONN-1..3: the connection's health settings
    breaker_failure_threshold = StringField("Circuit breaker: opens after this many consecutive failures", default="5")
    breaker_first_probe_seconds = StringField("First probe after (seconds)", default="30")
    breaker_max_probe_seconds = StringField("Probe delay doubles up to (seconds)", default="600")
    failure_window_hours = StringField("Disable after failing for (hours)", default="24")
    rate_limit_per_second = StringField(
        "Rate limit (requests per second, all workers)", default="", description="Empty: no limit."
    )


class ConnectionForm(ConnectionVersionForm):
    name = StringField("Name")
    slug = StringField("Slug", description="Lowercase letters, digits and hyphens, unique here.")
    integration_id = SelectField("Integration (platform)", validate_choice=False)
    bearer_token_action = SelectField("Bearer token", choices=BEARER_CHOICES_NEW, validate_choice=False)
    signing_secret_action = SelectField("Signing secret", choices=SIGNING_CHOICES_NEW, validate_choice=False)


KIND_LABELS = {
    "webhook": "webhook (the console's receipt contract)",
    "external_api": "external_api (the console's receipt contract)",
    "atproto_pds": "atproto_pds (an AT Protocol PDS's admin API)",
    "rest": "rest (a REST API answering in its own shape)",
}


class ComponentVersionForm(ConsoleForm):
    implementation_kind = SelectField(
        "Implementation kind",
        choices=[SelectChoice(k, KIND_LABELS.get(k, k)) for k in IMPLEMENTATION_KINDS],
        validate_choice=False,
    )
    implementation_reference = TextAreaField(
        "Implementation reference",
        description="webhook / external_api: method and path, e.g. POST /actions/takedown. atproto_pds: the "
        "operation and the subject kind: takedown record, takedown account, reversal record or reversal account. "
        'rest: a JSON object, e.g. {"request": "POST /v2/moderation/requests", "body": "{post: target.reference}", '
        '"outcome": {"2xx": "request.state == \'done\' && \'applied\' || \'accepted\'", "404": "\'failed\'"}, '
        '"read_back": {"request": "GET /v2/posts/{target.reference}/moderation", "value": "visibility", '
        '"expected": "removed"}}',
    )
    connection_version_id = SelectField("Connection version", validate_choice=False)
    input_schema = TextAreaField("Input JSON Schema", description="What the action's payload must match.")
    output_schema = TextAreaField("Output JSON Schema", description="What the platform's answer must match.")
    approval_mode = SelectField(
        "Approval policy",
        choices=[
            SelectChoice("human", "human (a second person approves)"),
            SelectChoice("bounded_auto", "bounded_auto (within budgets)"),
        ],
        validate_choice=False,
    )
    irreversible = BooleanField(
        "Irreversible: this action cannot be undone (no compensation exists)",
        description="Said on the approval panel; such actions need the policy the routes give irreversible actions (by default two reviewers) (POL-5).",
    )


class ComponentForm(ComponentVersionForm):
    name = StringField("Name")
    slug = StringField("Slug", description="Lowercase letters, digits and hyphens, unique here.")


class WorkflowVersionForm(ConsoleForm):
    authority_mode = SelectField(
        "Authority mode", choices=[SelectChoice(m) for m in AUTHORITY_MODES], default="assist", validate_choice=False
    )
    graph = TextAreaField("Graph (JSON)")
    active = BooleanField("Activate this version now (decisions start the newest active version)")


class WorkflowForm(WorkflowVersionForm):
    name = StringField("Name")
    slug = StringField("Slug", description="Lowercase letters, digits and hyphens, unique here.")


class BudgetForm(ConsoleForm):
    scope_type = SelectField(
        "Scope type",
        choices=[
            SelectChoice("workflow", "Workflow version"),
            SelectChoice("component", "Component version"),
            SelectChoice("queue", "Queue"),
        ],
        validate_choice=False,
    )
    scope_id = SelectField("Scope", validate_choice=False, description="Pick an item of the chosen scope type.")
    limit_amount = StringField("Limit (actions per window)")
    window_seconds = StringField("Window (seconds, 60–2,678,400)", default="3600")


class BudgetLimitForm(ConsoleForm):
    limit_amount = StringField("New limit")


ROLE_CHOICES = [SelectChoice(role) for role in ROLES]


class RolesForm(ConsoleForm):
    roles = MultiCheckboxField("Roles", choices=ROLE_CHOICES, validate_choice=False)


class UserForm(ConsoleForm):
    email = EmailField("Email")
    display_name = StringField("Display name")
    roles = MultiCheckboxField("Roles", choices=ROLE_CHOICES, validate_choice=False)


class ChangeApproveForm(ConsoleForm):
    digest = StringField(
        "Digest of the change you reviewed", description="Copy it from this page (the Copy digest button above): sha256:…"
    )


class ChangeRejectForm(ConsoleForm):
    reason = TextAreaField("Reason (3–2,000 characters, shown in the history)")


class AttributesForm(ConsoleForm):
    """An operator's team and attributes (POL-1): what approval eligibility reads."""

    team = StringField("Team", description="One word, e.g. trust-leads; empty for none.", validators=[Length(max=200)])
    attributes = TextAreaField(
        "Attributes", description="key=value, one per line (e.g. level=lead); at most 10.", validators=[Length(max=5000)]
    )


class ApprovalSettingsForm(ConsoleForm):
    """The whole approval settings document as JSON (POL-1, POL-3)."""

    settings = TextAreaField("Approval settings (JSON)", validators=[Length(max=200_000)])


class DsaSettingsForm(ConsoleForm):
    """The whole DSA settings document as JSON (DSA-1)."""

    settings = TextAreaField("DSA settings (JSON)", validators=[Length(max=200_000)])
