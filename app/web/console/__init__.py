"""The console: proposals, approval tasks, reports (and later appeals, admin,
operations). Views are thin: parse the request, call one service, render."""

from .blueprint import bp

from . import appeals, operations, proposals, reports, tasks  # noqa: F401
