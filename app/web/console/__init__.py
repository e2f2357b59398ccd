"""The console: proposals, approval tasks, reports (and later appeals, admin,
operations). Views are thin: parse the request, call one service, render."""

from . import appeals, bulk, operations, proposals, reports, tasks  # noqa: F401
from .blueprint import bp as bp
