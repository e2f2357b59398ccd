"""gunicorn.conf.py's worker hook: what the app built at start is frozen out of the
collector's reach in each web process (bench/NOTES.md, console latency)."""

from __future__ import annotations

import gc
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_web_process_freezes_what_it_built_at_start():
    settings = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    gc.unfreeze()
    try:
        settings["post_worker_init"](None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
