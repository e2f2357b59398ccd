"""Flask extensions, created unbound here and bound in `create_app`."""

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect

from .models.base import Base

db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
# Storage (Redis) is configured in create_app; limits are declared on the routes.
limiter = Limiter(key_func=get_remote_address, default_limits=[], strategy="fixed-window")
