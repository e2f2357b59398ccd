"""gunicorn settings for the console: ``gunicorn -c gunicorn.conf.py "app:create_app()"``.

Every setting can be changed through the environment (see docs/operations.md, Configuration).
"""

import gc
import os
import tempfile

# Metrics from every web process are aggregated from one directory (prometheus-client
# multiprocess mode). Workers on this host may share it (same variable).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="console-metrics-"))
os.environ.setdefault("PROCESS_ROLE", "web")

bind = os.environ.get("BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", "4"))
worker_class = "gthread"
timeout = int(os.environ.get("WEB_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
max_requests = int(os.environ.get("WEB_MAX_REQUESTS", "5000"))
max_requests_jitter = 500
accesslog = None  # the app logs one JSON line per request itself
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


def child_exit(server, worker):
    """Forget a dead web process's live gauges (prometheus-client multiprocess)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker):
    """Move what the app built at start (routes, mappers, templates, prebuilt statements)
    out of the collector's reach: each request's collections then scan only what it
    allocated (about 10 % of a console page's time, bench/NOTES.md)."""
    gc.collect()
    gc.freeze()
