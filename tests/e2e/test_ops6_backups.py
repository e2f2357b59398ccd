"""Backups restored and verified (SPEC OPS-6): a backup restores into a fresh database
whose chain verifies against the checkpoints shipped before it.

The commands are docs/backups.md's ```bash blocks, read from the page and run in
order in a shell (`.venv/bin/flask` is this interpreter's), with DATABASE_URL set as
the page says: the console's database for the backup, a fresh one for the restore.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from app.extensions import db
from app.services.backup import backup_key, write_backup

from ..builders import approve, decide_report
from .databases import ROOT, app_on, fresh_database, revisions, run_cli

BACKUPS = ROOT / "docs" / "backups.md"
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def doc_blocks(path: Path) -> list[str]:
    """The ```bash blocks of a docs page, in order."""
    return BASH_BLOCK.findall(path.read_text())


def shell(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run `script` with bash -e in `cwd`, where `.venv` is this interpreter's virtualenv."""
    venv = cwd / ".venv"
    if not venv.exists():
        venv.symlink_to(Path(sys.prefix))
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "FLASK_DEBUG": "0", **env}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )


def rows_of(url: str, path: Path) -> list[str]:
    """A database's rows as backup lines, without the header (which has the time) and
    the MAC line (which covers the header)."""
    engine = create_engine(url)
    with engine.connect() as conn:
        write_backup(conn, path, backup_key(b"any key"))
    engine.dispose()
    with gzip.open(path, "rt") as lines:
        return lines.read().splitlines()[1:-1]


@pytest.fixture
def story(app, world, runner):
    """Proposals decided and approved (audit rows, sealed secrets), then a checkpoint."""
    for index in range(3):
        proposal = decide_report(world, index)
        approve(world, proposal)
    written = runner.invoke(args=["audit-checkpoint"])
    assert written.exit_code == 0, written.output
    return world


def test_ops6_a_backup_restores_into_a_fresh_database_whose_chain_verifies_against_the_checkpoints(
    app, story, database_url, redis_url, tmp_path
):
    """OPS-6: docs/backups.md's commands, run as written: `flask backup` of a database with
    proposals, audit rows and a checkpoint shipped before it; in a fresh database `flask db
    upgrade`, `flask restore` and `flask verify-audit --checkpoints` against that
    checkpoint file: ok. The restored database holds exactly the rows backed up."""
    backup_block, restore_block = doc_blocks(BACKUPS)
    work = tmp_path / "ops"
    work.mkdir()
    shutil.copyfile(tmp_path / "audit-checkpoints.jsonl", work / "audit-checkpoints.jsonl")  # the shipped copy
    env = {"INSTANCE_PATH": str(tmp_path), "REDIS_URL": redis_url}

    backed_up = shell(backup_block, work, DATABASE_URL=database_url, **env)
    assert backed_up.returncode == 0, backed_up.stderr
    assert "backup written to console-backup.jsonl.gz" in backed_up.stdout

    target = fresh_database(tmp_path, "ops6_restore")
    restored = shell(restore_block, work, DATABASE_URL=target, **env)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "restored " in restored.stdout
    assert re.search(r"demo: ok \(\d+ rows; 1 checkpoints agree\)", restored.stdout), restored.stdout

    assert rows_of(target, tmp_path / "after.jsonl.gz") == rows_of(database_url, tmp_path / "before.jsonl.gz")


def test_ops6_restore_refuses_a_database_with_rows_another_migration_or_a_cut_file(app, story, database_url, tmp_path):
    """OPS-6: `flask restore` into a database that has rows, or is at another migration,
    or from a file cut short or not a backup: exit 1 with the code and what to do, and
    no row written."""
    backup = tmp_path / "b.jsonl"
    assert run_cli(app, "backup", str(backup)).exit_code == 0

    refused = run_cli(app, "restore", str(backup))
    assert refused.exit_code == 1
    assert "database_not_empty: the database already has rows in " in refused.output

    older = fresh_database(tmp_path, "ops6_restore")
    older_app = app_on(older, tmp_path)
    assert run_cli(older_app, "db", "upgrade", revisions()[-2]).exit_code == 0
    mismatch = run_cli(older_app, "restore", str(backup))
    assert mismatch.exit_code == 1
    assert f"revision_mismatch: the backup was taken at migration {revisions()[-1]}" in mismatch.output
    assert f"db upgrade {revisions()[-1]}" in mismatch.output

    empty = fresh_database(tmp_path, "ops6_restore")
    empty_app = app_on(empty, tmp_path)
    assert run_cli(empty_app, "db", "upgrade").exit_code == 0
    lines = backup.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-3]) + "\n")
    incomplete = run_cli(empty_app, "restore", str(cut))
    assert incomplete.exit_code == 1 and "backup_incomplete:" in incomplete.output
    half = tmp_path / "half.jsonl"
    half.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][: len(lines[-3]) // 2])
    halfway = run_cli(empty_app, "restore", str(half))
    assert halfway.exit_code == 1 and "backup_incomplete:" in halfway.output
    (tmp_path / "other.jsonl").write_text(json.dumps({"kind": "something else"}) + "\n")
    other = run_cli(empty_app, "restore", str(tmp_path / "other.jsonl"))
    assert other.exit_code == 1 and "not_a_backup:" in other.output
    assert any(json.loads(lines[-2])["end"].values())  # the story wrote rows
    assert rows_of(empty, tmp_path / "empty.jsonl.gz")[-1] == json.dumps(
        {"end": dict.fromkeys(json.loads(lines[-2])["end"], 0)}, separators=(",", ":")
    )


def test_ops6_restore_refuses_a_backup_taken_under_another_audit_chain_key(app, story, tmp_path):
    """OPS-6: a backup's MAC line is keyed by AUDIT_CHAIN_KEY; restoring it with another
    key answers `backup_altered` naming the key, exit 1, and writes no row."""
    backup = tmp_path / "other-key.jsonl.gz"
    with db.engine.connect() as conn:
        write_backup(conn, backup, backup_key(b"another-audit-chain-key-" + b"x" * 32))
    empty = fresh_database(tmp_path, "ops6_restore")
    empty_app = app_on(empty, tmp_path)
    assert run_cli(empty_app, "db", "upgrade").exit_code == 0
    refused = run_cli(empty_app, "restore", str(backup))
    assert refused.exit_code == 1, refused.output
    assert "backup_altered:" in refused.output and "another AUDIT_CHAIN_KEY" in refused.output
    assert rows_of(empty, tmp_path / "empty.jsonl.gz")[-1].startswith('{"end":{')
    assert not any(json.loads(rows_of(empty, tmp_path / "empty.jsonl.gz")[-1])["end"].values())
