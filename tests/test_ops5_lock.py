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
LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][\w.-]*)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.M)


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every pin in requirements.lock."""
    return {
        canonicalize_name(name): (version, re.findall(r"sha256:([0-9a-f]{64})", hashes))
        for name, version, hashes in PIN.findall(LOCK.read_text())
    }


def test_ops5_every_requirement_is_pinned_in_its_range_with_hashes():
    """OPS-5: each requirement of pyproject.toml and of its test extra is in
    requirements.lock at a version it allows, and every pin there has its hashes
    (pip's --require-hashes refuses a lock with one unhashed line)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked()
    pinned_lines = re.findall(r"^[A-Za-z0-9][\w.-]*==", LOCK.read_text(), re.M)
    assert len(pins) == len(pinned_lines) > 50
    for line in project["dependencies"] + project["optional-dependencies"]["test"]:
        requirement = Requirement(line)
        version, hashes = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)
        assert hashes, requirement.name


def test_ops5_ci_and_readme_install_from_the_lock_with_hashes():
    """OPS-5: .ci/test and README's start command install the dependencies from the lock
    with --require-hashes and the project itself without dependencies; .ci/test
    installs again when the lock changes."""
    ci = (ROOT / ".ci" / "test").read_text()
    assert "pip install -q --require-hashes -r requirements.lock" in ci
    assert "pip install -q --no-deps -e ." in ci
    assert "cat requirements.lock pyproject.toml | sha256sum" in ci
    assert "'.[test]'" not in ci
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/pip install -q --require-hashes -r requirements.lock" in readme
    assert ".venv/bin/pip install -q --no-deps -e ." in readme


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

    copy = tmp_path / "checkout"
    (copy / ".ci").mkdir(parents=True)
    for name in (".ci/lock", "requirements.lock", "README.md", "LICENSE"):
        (copy / name).write_text((ROOT / name).read_text())
    pyproject = (ROOT / "pyproject.toml").read_text().replace('"pyotp>=2.9,<3"', '"pyotp>=3,<4"')
    (copy / "pyproject.toml").write_text(pyproject)
    stale = subprocess.run(
        ["bash", ".ci/lock", "--check"], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert stale.returncode == 1
    assert "pyotp: requirements.lock pins 2." in stale.stderr and "pyproject.toml asks <4,>=3" in stale.stderr
