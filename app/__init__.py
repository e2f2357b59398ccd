"""The action console: application factory.

`create_app(config)` builds the Flask app; the RQ worker (worker.py) builds the
same app and runs its jobs inside it, so web and workers share one model layer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from flask import Flask

from .config import Config, ConfigError
from .database import install_engine_hooks
from .extensions import csrf, db, limiter, login_manager, migrate


# gunicorn's "App failed to load": its master stops instead of restarting workers.
CONFIG_EXIT_STATUS = 4


def refuse_to_start(error: Exception):
    """Stop a process whose configuration is wrong with one clear line on stderr, not a
    traceback: the same under ``flask``, gunicorn and RQ workers.

    Raises:
        SystemExit: always, status `CONFIG_EXIT_STATUS`.
    """
    print(f"console: configuration error: {error}", file=sys.stderr, flush=True)
    raise SystemExit(CONFIG_EXIT_STATUS)


def create_app(overrides: Mapping[str, Any] | None = None, web: bool = True) -> Flask:
    """Create the console.

    Args:
        overrides: settings applied over the environment's (tests use this).
        web: False for a worker process: no pages, API or login views (their imports
            and registration cost each worker about 0.3 s of CPU at start, and no
            job renders a page or builds a URL).

    Raises:
        SystemExit: status 4 after one line on stderr when a setting is refused
            (`app.config.ConfigError`, a ``SECRETS_KEY`` that is not a key).
    """
    app = Flask(
        __name__,
        template_folder="../templates",
        static_folder="../static",
        instance_path=os.environ.get("INSTANCE_PATH") or None,
        instance_relative_config=True,
    )
    os.makedirs(app.instance_path, exist_ok=True)
    try:
        app.config.from_object(Config(app.instance_path))
    except ConfigError as error:
        refuse_to_start(error)
    if overrides:
        app.config.update(overrides)
    if app.config["CONFIGURE_LOGGING"]:
        from .observability import configure_logging

        configure_logging(os.environ.get("PROCESS_ROLE", "web"), app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])
    if app.config["TRUSTED_PROXIES"]:
        from werkzeug.middleware.proxy_fix import ProxyFix

        hops = app.config["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)
    from .secret_box import SecretBoxError, box_from_texts

    try:
        app.extensions["secret_box"] = box_from_texts(app.config["SECRETS_KEY"], app.config["SECRETS_KEY_PREVIOUS"])
    except SecretBoxError as error:
        refuse_to_start(error)
    install_engine_hooks()
    db.init_app(app)
    migrate.init_app(app, db, directory=os.path.join(os.path.dirname(__file__), "..", "migrations"))
    login_manager.init_app(app)
    csrf.init_app(app)
    if not app.config.get("RATELIMIT_STORAGE_URI"):
        from .queueing import redis_url

        url = redis_url(app)
        app.config["RATELIMIT_STORAGE_URI"] = "redis+" + url if url.startswith("unix://") else url
    limiter.init_app(app)

    if web:
        from .web import register_web

        register_web(app)

    from .cli import register_cli

    register_cli(app)
    return app
