"""Browser tests: Debian's Chromium driven by Playwright, against the console served
on loopback, a real worker process and the demo platform."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.demo_platform import serve

from ..conftest import BACKEND

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
POLL_SECONDS = 0.5


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


def pass_second_factor(page, email: str) -> None:
    """After the password: the code page with a current code of the seed the test
    builders enrolled the account with (OPS-2); nothing for an account without one."""
    from ..builders import totp_code

    from playwright.sync_api import expect

    code, signed_in = page.get_by_label("Code"), page.get_by_role("button", name="Sign out")
    expect(code.or_(signed_in).first).to_be_visible()
    if code.is_visible():
        code.fill(totp_code(email))
        page.get_by_role("button", name="Sign in").click()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is required for browser tests: apt-get install chromium (.ci/test does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def screenshots() -> Path:
    folder = Path(os.environ.get("ARTIFACTS_DIR", ROOT / "artifacts")) / "screenshots" / BACKEND
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def console(app, world, platform, tmp_path):
    """The console on a loopback port plus one real RQ worker process."""
    app.config["CONSOLE_POLL_SECONDS"] = POLL_SECONDS
    server, url = serve(app)
    env = {
        **os.environ,
        "DATABASE_URL": app.config["SQLALCHEMY_DATABASE_URI"],
        "REDIS_URL": app.config["REDIS_URL"],
        "EGRESS_ALLOW_PRIVATE": "1",
        "INSTANCE_PATH": str(tmp_path / "worker"),
        "LOG_LEVEL": "WARNING",
    }
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "worker.py"), "--no-cron"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield url
    worker.terminate()
    worker.wait(timeout=30)
    server.shutdown()


@pytest.fixture
def page(browser, console):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console)
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.js_errors = errors
    yield page
    context.close()
