"""The console: proposals, approval tasks, reports (and later appeals, admin,
operations). Views are thin: parse the request, call one service, render."""

from . import appeals, bulk, emergency, inbox, operations, proactive, proposals, queue, reports, tasks, transparency  # noqa: F401
from .blueprint import bp as bp
from . import bulk_json  # noqa: E402,F401  (BULK: console JSON)
