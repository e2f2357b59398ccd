from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length

from app.web.forms import ConsoleForm


class LoginForm(ConsoleForm):
    email = EmailField("Email", validators=[DataRequired(), Length(max=320)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=500)])


class InvitationForm(ConsoleForm):
    """The invitee's own password (FOUR-6): 12 to 500 characters, typed twice."""

    password = PasswordField("New password (at least 12 characters)", validators=[Length(max=500)])
    confirm = PasswordField("The same password again", validators=[Length(max=500)])
