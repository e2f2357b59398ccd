"""The console: proposals, approval tasks, reports (and later appeals, admin,
operations). Views are thin: parse the request, call one service, render."""

from flask import Blueprint

bp = Blueprint("console", __name__)

from . import appeals, operations, proposals, reports, tasks  # noqa: E402,F401
