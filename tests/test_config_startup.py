"""A console started with a wrong setting refuses with one clear line, not a traceback
(OPS-6's production settings; SEC: a placeholder session key forges any session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import Config, ConfigError
from app.secret_box import new_key_text

ROOT = Path(__file__).resolve().parents[1]
GOOD = {
    "CONSOLE_ENV": "production",
    "SECRET_KEY": "a-real-session-key-" + "k" * 20,
    "AUDIT_CHAIN_KEY": "a-real-audit-chain-key-" + "a" * 20,
}


@pytest.fixture
def production_env(monkeypatch, tmp_path):
    for name, value in {**GOOD, "SECRETS_KEY": new_key_text()}.items():
        monkeypatch.setenv(name, value)
    return tmp_path


@pytest.mark.parametrize("key", ["change-me", "short-but-not-placeholder", "", " " * 40])
def test_production_refuses_a_placeholder_or_short_secret_key(production_env, monkeypatch, key):
    monkeypatch.setenv("SECRET_KEY", key)
    with pytest.raises(ConfigError, match="SECRET_KEY must") as refused:
        Config(str(production_env))
    assert "\n" not in str(refused.value)


def test_production_accepts_a_long_secret_key_and_development_any(production_env, monkeypatch):
    assert Config(str(production_env)).SECRET_KEY == GOOD["SECRET_KEY"]
    monkeypatch.setenv("CONSOLE_ENV", "development")
    monkeypatch.setenv("SECRET_KEY", "change-me")
    assert Config(str(production_env)).SECRET_KEY == "change-me"


def start(argv: list[str], env: dict[str, str], tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        **env,
        "PYTHONPATH": str(ROOT),
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'console.db'}",
    }
    environment.pop("SECRETS_KEY_PREVIOUS", None)
    return subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout)


REFUSALS = [
    ({"SECRET_KEY": "change-me"}, "SECRET_KEY must be at least 32"),
    ({"AUDIT_CHAIN_KEY": "change-me"}, "AUDIT_CHAIN_KEY must be at least 32"),
    ({"SECRETS_KEY": "change-me"}, "SECRETS_KEY must be base64url of 32 random bytes"),
]


@pytest.mark.parametrize("wrong,message", REFUSALS)
def test_production_flask_refuses_to_start_with_one_clear_line(tmp_path, wrong, message):
    env = {**GOOD, "SECRETS_KEY": new_key_text(), **wrong}
    done = start([sys.executable, "-m", "flask", "--app", "app", "secrets-status"], env, tmp_path)
    assert done.returncode == 4
    assert "Traceback" not in done.stderr
    assert f"console: configuration error: {message}" in done.stderr.strip().splitlines()[-1]


def test_production_gunicorn_stops_with_one_clear_line_not_restarting_workers(tmp_path):
    """The placeholder of docs/deploy/console.env: the master stops (App failed to load)."""
    env = {**GOOD, "SECRETS_KEY": new_key_text(), "SECRET_KEY": "change-me", "BIND": "127.0.0.1:0",
           "WEB_CONCURRENCY": "1", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    # a regression (workers restarted forever) shows as TimeoutExpired; run() kills it
    done = start([gunicorn, "-c", "gunicorn.conf.py", "app:create_app()"], env, tmp_path, timeout=60)
    assert done.returncode == 4
    assert "console: configuration error: SECRET_KEY must be at least 32" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_deploy_env_file_placeholders_are_refused_in_production():
    """docs/deploy/console.env's secrets are placeholders that production refuses to start with."""
    env = (ROOT / "docs" / "deploy" / "console.env").read_text()
    for name in ("SECRET_KEY", "AUDIT_CHAIN_KEY", "SECRETS_KEY"):
        assert f"\n{name}=change-me" in env
