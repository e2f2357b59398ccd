"""gunicorn.conf.py's worker hook: what the app built at start is frozen out of the
collector's reach in each web process (bench/NOTES.md, console latency)."""

from __future__ import annotations

import gc
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_web_process_freezes_what_it_built_at_start(monkeypatch, tmp_path):
    # the settings file sets these when unset; this process's metrics must not follow them
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setenv("PROCESS_ROLE", "web")
    settings = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    gc.unfreeze()
    try:
        settings["post_worker_init"](None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
