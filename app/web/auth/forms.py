from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length

from app.web.forms import ConsoleForm


class LoginForm(ConsoleForm):
    email = EmailField("Email", validators=[DataRequired(), Length(max=320)])
    password = PasswordField("Password", validators=[DataRequired(), Length(max=500)])
