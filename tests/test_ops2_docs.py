"""docs/second-factor.md's commands run (SPEC OPS-2, issue 26: every command in the
production docs is run by a test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyotp

from app.demo import demo_totp_seed

ROOT = Path(__file__).resolve().parents[1]


def test_ops2_the_demo_code_command_of_the_docs_prints_the_accounts_current_code():
    """Reads the doc's ```bash block and runs each line as written, with `.venv/bin/python`
    standing for this interpreter where the checkout has no `.venv` (a worktree)."""
    doc = (ROOT / "docs" / "second-factor.md").read_text()
    commands = [line for block in re.findall(r"```bash\n(.*?)```", doc, re.S) for line in block.splitlines() if line]
    assert commands == [".venv/bin/python -m app.demo_code reviewer@example.com"]
    python = ".venv/bin/python" if (ROOT / ".venv/bin/python").exists() else sys.executable
    argv = commands[0].replace(".venv/bin/python", python).split()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    totp = pyotp.TOTP(demo_totp_seed("reviewer@example.com"))
    assert totp.verify(done.stdout.strip(), valid_window=1)


def test_ops2_the_demo_code_command_says_how_to_use_it():
    done = subprocess.run(
        [sys.executable, "-m", "app.demo_code"], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "usage" in done.stderr
