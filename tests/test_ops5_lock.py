"""Dependencies from a lock file with hashes, and a license (SPEC OPS-5)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"  # what production installs: pyproject.toml's dependencies
TEST_LOCK = ROOT / "requirements-test.lock"  # what CI installs: those and the `test` extra
PIN = re.compile(r"^([A-Za-z0-9][\w.-]*)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.M)


def locked(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every pin in `lock`."""
    return {
        canonicalize_name(name): (version, re.findall(r"sha256:([0-9a-f]{64})", hashes))
        for name, version, hashes in PIN.findall(lock.read_text())
    }


def test_ops5_every_requirement_is_pinned_in_its_range_with_hashes():
    """OPS-5: each requirement of pyproject.toml is in both locks, and each of its test
    extra in the test lock, at a version it allows; every pin there has its hashes
    (pip's --require-hashes refuses a lock with one unhashed line)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = project["dependencies"]
    for lock, requirements in ((LOCK, runtime), (TEST_LOCK, runtime + project["optional-dependencies"]["test"])):
        pins = locked(lock)
        pinned_lines = re.findall(r"^[A-Za-z0-9][\w.-]*==", lock.read_text(), re.M)
        assert len(pins) == len(pinned_lines) > 30, lock.name
        for line in requirements:
            requirement = Requirement(line)
            version, hashes = pins[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(version, prereleases=True), (lock.name, requirement, version)
            assert hashes, (lock.name, requirement.name)


def test_ops5_the_runtime_lock_holds_no_test_tooling():
    """OPS-5: requirements.lock, which production hosts install, holds none of the test
    extra's packages (pytest, Playwright's browser driver, mutmut...), and the test lock
    pins every package of the runtime lock at the same version with the same hashes, so
    CI tests what production runs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, test = locked(LOCK), locked(TEST_LOCK)
    test_only = {canonicalize_name(Requirement(line).name) for line in project["optional-dependencies"]["test"]}
    assert {"pytest", "playwright", "mutmut", "schemathesis", "hypothesis"} <= test_only
    assert not test_only & runtime.keys(), test_only & runtime.keys()
    assert test_only <= test.keys()
    for name, pin in runtime.items():
        assert test.get(name) == pin, (name, pin, test.get(name))


def test_ops5_ci_and_readme_install_from_the_lock_with_hashes():
    """OPS-5: .ci/test installs the test lock, README's start command and the deployment
    guide the runtime lock, each with --require-hashes and the project itself without
    dependencies; .ci/test installs again when either lock or pyproject.toml changes."""
    ci = (ROOT / ".ci" / "test").read_text()
    assert "pip install -q --require-hashes -r requirements-test.lock" in ci
    assert "-r requirements.lock" not in ci
    assert "pip install -q --no-deps -e ." in ci
    assert "cat requirements.lock requirements-test.lock pyproject.toml | sha256sum" in ci
    assert "'.[test]'" not in ci
    for doc in ("README.md", "docs/tour.md"):
        text = (ROOT / doc).read_text()
        assert ".venv/bin/pip install -q --require-hashes -r requirements.lock " in text, doc
        assert ".venv/bin/pip install -q --no-deps -e ." in text, doc
        assert "requirements-test.lock \\" not in text, doc
    deploy = (ROOT / "docs" / "deploy" / "README.md").read_text()
    assert ".venv/bin/pip install --require-hashes -r requirements.lock " in deploy
    assert "requirements-test.lock" not in deploy


def test_ops5_the_project_has_a_license():
    """OPS-5: LICENSE holds the MIT license that pyproject.toml names."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_ops5_the_lock_check_passes_and_fails_on_a_requirement_the_lock_lacks(tmp_path):
    """OPS-5: `bash .ci/lock --check` passes on the checkout, and fails, naming it, on a
    pyproject.toml whose requirement the lock does not satisfy (the copy is changed,
    not the checkout). It resolves through pip's configured indexes."""
    env = {**os.environ, "PYTHON": sys.executable}
    ok = subprocess.run(["bash", ".ci/lock", "--check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "requirements.lock matches pyproject.toml" in ok.stdout
    assert "requirements-test.lock matches pyproject.toml" in ok.stdout

    copy = tmp_path / "checkout"
    (copy / ".ci").mkdir(parents=True)
    for name in (".ci/lock", "requirements.lock", "requirements-test.lock", "README.md", "LICENSE"):
        (copy / name).write_text((ROOT / name).read_text())
    pyproject = (ROOT / "pyproject.toml").read_text().replace('"pyotp>=2.9,<3"', '"pyotp>=3,<4"')
    (copy / "pyproject.toml").write_text(pyproject)
    stale = subprocess.run(
        ["bash", ".ci/lock", "--check"], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert stale.returncode == 1
    assert "pyotp: requirements.lock pins 2." in stale.stderr and "pyproject.toml asks <4,>=3" in stale.stderr
