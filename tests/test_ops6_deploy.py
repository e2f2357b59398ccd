"""docs/deploy/ is true (SPEC OPS-6's production docs): the systemd units are valid
and start what the README and Procfile start, with options that exist; console.env
names only settings the console reads; nginx forwards what TRUSTED_PROXIES trusts."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_docs import read_environment_names

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "docs" / "deploy"
UNITS = sorted(DEPLOY.glob("*.service"))


def exec_start(unit: Path) -> str:
    (line,) = re.findall(r"^ExecStart=(.*)$", unit.read_text(), re.M)
    return line


def test_ops6_the_units_start_the_commands_the_console_documents():
    """Web runs gunicorn as Procfile does; workers run worker.py with its own options only;
    every unit reads /etc/console/console.env and runs as the console user."""
    procfile = (ROOT / "Procfile").read_text()
    assert '-c gunicorn.conf.py' in procfile and '"app:create_app()"' in procfile
    assert exec_start(DEPLOY / "console-web.service") == (
        '/opt/console/.venv/bin/gunicorn -c gunicorn.conf.py "app:create_app()"'
    )
    options = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", (ROOT / "worker.py").read_text()))
    for unit in (DEPLOY / "console-worker@.service", DEPLOY / "console-sweeps.service"):
        command = exec_start(unit)
        assert command.startswith("/opt/console/.venv/bin/python worker.py")
        assert {w for w in command.split() if w.startswith("--")} <= options, unit.name
    assert "--no-cron" in exec_start(DEPLOY / "console-worker@.service")
    assert "--no-cron" not in exec_start(DEPLOY / "console-sweeps.service")  # it schedules the sweeps
    for unit in UNITS:
        text = unit.read_text()
        assert "EnvironmentFile=/etc/console/console.env" in text and "User=console" in text, unit.name


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze on this host")
def test_ops6_the_units_pass_systemd_analyze_verify(tmp_path):
    """`systemd-analyze verify` finds nothing wrong in any unit (with /opt/console pointing
    at this checkout's virtualenv, so the executables exist)."""
    release = tmp_path / "opt-console"
    release.mkdir()
    (release / ".venv").symlink_to(Path(sys.prefix))
    for unit in UNITS:
        name = unit.name.replace("@.", "@1.")
        (tmp_path / name).write_text(unit.read_text().replace("/opt/console", str(release)))
        checked = subprocess.run(
            ["systemd-analyze", "verify", "--man=no", str(tmp_path / name)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0 and checked.stderr.strip() == "", (name, checked.stderr)


def test_ops6_every_unit_using_run_console_creates_it():
    """Each unit that reads the console's runtime directory (its ReadWritePaths, or
    PROMETHEUS_MULTIPROC_DIR from console.env, which every unit loads) creates it and the
    metrics directory itself (RuntimeDirectory=), so a worker-only host, or workers
    started before the web unit, still start; and keeps them when it stops
    (RuntimeDirectoryPreserve=yes), since systemd would remove them under the others."""
    (metrics,) = re.findall(r"^PROMETHEUS_MULTIPROC_DIR=(.*)$", (DEPLOY / "console.env").read_text(), re.M)
    assert metrics.startswith("/run/")
    relative = Path(metrics).relative_to("/run")  # RuntimeDirectory= names it and each parent
    needed = {str(relative)} | {str(parent) for parent in relative.parents if parent != Path(".")}
    assert needed == {"console", "console/metrics"}
    for unit in UNITS:
        text = unit.read_text()
        assert "EnvironmentFile=/etc/console/console.env" in text, unit.name
        created = {name for line in re.findall(r"^RuntimeDirectory=(.*)$", text, re.M) for name in line.split()}
        writable = {path for line in re.findall(r"^ReadWritePaths=(.*)$", text, re.M) for path in line.split()}
        used = needed | {path.removeprefix("/run/") for path in writable if path.startswith("/run/")}
        assert used <= created, (unit.name, sorted(used - created))
        assert re.search(r"^RuntimeDirectoryPreserve=yes$", text, re.M), unit.name


def test_ops6_console_env_names_only_settings_the_console_reads():
    """Every variable in docs/deploy/console.env is read by the console's code."""
    names = re.findall(r"^([A-Z][A-Z0-9_]+)=", (DEPLOY / "console.env").read_text(), re.M)
    assert {"CONSOLE_ENV", "DATABASE_URL", "REDIS_URL", "AUDIT_CHAIN_KEY", "TRUSTED_PROXIES"} <= set(names)
    assert sorted(set(names) - read_environment_names()) == []


def test_ops6_the_proxy_sets_the_headers_one_trusted_hop_reads():
    """nginx sets X-Forwarded-For and -Proto itself (one hop: TRUSTED_PROXIES=1), redirects
    plain HTTP to HTTPS and proxies to the address gunicorn binds."""
    nginx = (DEPLOY / "nginx.conf").read_text()
    env = (DEPLOY / "console.env").read_text()
    assert "TRUSTED_PROXIES=1" in env and "BIND=127.0.0.1:8000" in env
    assert "proxy_set_header X-Forwarded-For   $remote_addr;" in nginx
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in nginx
    assert "return 301 https://$host$request_uri;" in nginx and "listen 443 ssl;" in nginx
    assert nginx.count("proxy_pass http://127.0.0.1:8000;") == 2
