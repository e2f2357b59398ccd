"""README's demo command (`flask --app app demo`) does what README and docs/tour.md
say: one command migrates an SQLite file, starts an embedded Redis, seeds once, and
runs console, worker and demo platform; the tour's walkthrough works; Ctrl-C (SIGTERM
here) stops all three; a second start finds its data and its secrets again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, text

from app.demo import DEMO_PASSWORD
from app.demo_queue import QUEUE_DEMO_REPORTS

from ..builders import http_sign_in
from ..processes import eventually
from .test_production import free_port

ROOT = Path(__file__).resolve().parents[2]
FLASK = Path(sys.executable).parent / "flask"


class Demo:
    def __init__(self, instance: Path) -> None:
        self.instance = instance
        self.port, self.platform_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.platform = f"http://127.0.0.1:{self.platform_port}"
        self.process: subprocess.Popen | None = None

    def start(self, platform: str = "demo", timeout: float = 90) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
        env["INSTANCE_PATH"] = str(self.instance)
        self.log = open(self.instance.parent / "demo.log", "a")  # noqa: SIM115 (closed in stop)
        ports = ["--port", str(self.port), "--platform-port", str(self.platform_port)]
        self.process = subprocess.Popen(
            [str(FLASK), "--app", "app", "demo", *ports, "--platform", platform],
            env=env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal would run it
        )
        eventually(self._up, timeout=timeout)

    def _up(self) -> bool:
        assert self.process.poll() is None, self.output()
        try:
            ready = requests.get(f"{self.base}/readyz", timeout=5).status_code == 200
            return ready and requests.get(f"{self.platform}/content", timeout=5).ok
        except (requests.ConnectionError, requests.Timeout):  # still starting
            return False

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=30)
        self.log.close()
        return code

    def output(self) -> str:
        self.log.flush()
        return (self.instance.parent / "demo.log").read_text()

    def children(self) -> dict[str, int]:
        """The demo's own child processes by role: ``platform``, ``worker``, ``pds``."""
        # by parent, not by environment: RQ's process title overwrites the worker's
        roles = {"app.demo_platform": "platform", "worker.py": "worker", "rq:worker": "worker", "pds_launch.mjs": "pds"}
        found = {}
        for pid in _children_of(self.process.pid):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            found.update({role: pid for marker, role in roles.items() if marker in command})
        return found

    def query(self, sql: str, **params):
        engine = create_engine(f"sqlite:///{self.instance / 'console.db'}")
        try:
            with engine.connect() as connection:
                return connection.execute(text(sql), params).first()
        finally:
            engine.dispose()


@pytest.fixture
def demo(tmp_path):
    made = Demo(tmp_path / "instance")
    yield made
    if made.process is not None and made.process.poll() is None:
        os.killpg(made.process.pid, signal.SIGKILL)
    for pid in _processes_of(made.instance):  # whatever outlived it, so no later test meets it
        os.kill(pid, signal.SIGKILL)


def csrf(html: str) -> str:
    return re.search(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"', html).group(1)


def sign_in(base: str, email: str) -> tuple[requests.Session, str]:
    session = requests.Session()
    response = http_sign_in(session, base, email)  # the demo's published seeds (OPS-2)
    assert response.status_code == 303, response.text[:500]
    return session, csrf(session.get(f"{base}/proposals").text)


def refused(url: str) -> bool:
    try:
        requests.get(url, timeout=2)
        return False
    except requests.ConnectionError:
        return True


def enforce(demo: Demo, reference: str, post: str) -> str:
    """The tour's walkthrough (docs/tour.md): a moderator decides, a reviewer approves, the worker delivers."""
    report_id = demo.query("SELECT id FROM reports WHERE public_reference = :ref", ref=reference)[0]

    moderator, token = sign_in(demo.base, "moderator@example.com")
    unexplained = moderator.post(  # DSA-2: the demo makes statements of reasons; a restriction needs its facts
        f"{demo.base}/reports/{report_id}/decisions",
        data={"decision_code": "remove_content", "csrf_token": token},
        allow_redirects=False,
    )
    assert unexplained.status_code == 422 and "statement of reasons" in unexplained.text
    decided = moderator.post(
        f"{demo.base}/reports/{report_id}/decisions",
        data={"decision_code": "remove_content", "rationale": "Insults aimed at another member.", "csrf_token": token},
        allow_redirects=False,
    )
    assert decided.status_code == 303
    proposal_id, digest, state = demo.query(
        "SELECT id, payload_digest, state FROM action_proposals WHERE report_id = :r", r=report_id
    )
    assert state == "approval_required"
    reviewer, token = sign_in(demo.base, "reviewer@example.com")
    assert digest in reviewer.get(f"{demo.base}/proposals/{proposal_id}").text
    approved = reviewer.post(
        f"{demo.base}/proposals/{proposal_id}/decision",
        data={"decision": "approved", "payload_digest": digest, "idempotency_key": reference, "csrf_token": token},
        allow_redirects=False,
    )
    assert approved.status_code == 303
    eventually(lambda: demo.query("SELECT state FROM action_proposals WHERE id = :p", p=proposal_id)[0] == "applied")
    assert requests.get(f"{demo.platform}/content", timeout=5).json()["content"][post] == "removed"
    return proposal_id


def test_the_demo_command_runs_readme_walkthrough_stops_everything_and_restarts(demo):
    """PREP-8, APPR-5, DLV-4: the tour's three steps; Ctrl-C stops console, worker and
    platform; a second start seeds nothing twice and delivers with the saved secrets."""
    demo.start()
    assert "moderator@example.com" in demo.output() and DEMO_PASSWORD in demo.output()
    assert requests.get(f"{demo.platform}/content", timeout=5).json()["content"]["post:1001"] == "visible"
    proposal_id = enforce(demo, "R-DEMO01", "post:1001")

    assert demo.stop() == 0
    assert refused(f"{demo.base}/healthz") and refused(f"{demo.platform}/content")
    seeded = [
        demo.query(f"SELECT count(*) FROM {table}")[0] for table in ("installations", "operator_users", "reports")
    ]
    # six operators: the demo has a second admin (FOUR-2); six reports of the tour, and the queue's (issue 25)
    assert seeded == [1, 6, 6 + QUEUE_DEMO_REPORTS]

    demo.start()
    assert [
        demo.query(f"SELECT count(*) FROM {table}")[0] for table in ("installations", "operator_users", "reports")
    ] == seeded
    assert demo.query("SELECT state FROM action_proposals WHERE id = :p", p=proposal_id)[0] == "applied"
    enforce(demo, "R-DEMO02", "post:1002")  # the worker and the platform share the saved secrets again
    assert demo.stop() == 0


def _children_of(parent: int) -> list[int]:
    """Live processes whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
        except OSError:  # gone
            continue
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _processes_of(instance: Path) -> list[int]:
    """Processes started for this demo (they carry its INSTANCE_PATH), still alive."""
    marker = f"INSTANCE_PATH={instance}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


@pytest.mark.parametrize("taken_port", ["console", "platform"])
def test_a_port_in_use_stops_the_demo_without_leaving_its_worker_behind(demo, taken_port):
    """docs/tour.md ("until Ctrl-C, which stops all three"): when the console's or the demo
    platform's port is taken the command says so and exits, and starts no worker or
    platform that would outlive it (once an orphaned worker kept retrying the embedded
    Redis that had gone; once the console ran with no platform behind it)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", demo.port if taken_port == "console" else demo.platform_port))
        taken.listen()
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
        env["INSTANCE_PATH"] = str(demo.instance)
        log = demo.instance.parent / "demo.log"
        with open(log, "w") as output:  # a file, not a pipe: an orphan would hold a pipe open
            ports = ["--port", str(demo.port), "--platform-port", str(demo.platform_port)]
            code = subprocess.call(
                [str(FLASK), "--app", "app", "demo", *ports],
                env=env,
                cwd=ROOT,
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=120,
            )
    assert code != 0 and "in use" in log.read_text()
    left = _processes_of(demo.instance)
    for pid in left:  # do not leave them running for the next test either
        os.kill(pid, signal.SIGKILL)
    assert left == []
    assert refused(demo.platform + "/content") if taken_port == "console" else refused(demo.base + "/login")


@pytest.mark.timeout(600)  # the PDS case may wait 240 s for the demo to start
@pytest.mark.parametrize("child", ["platform", "worker", "pds"])
def test_the_demo_says_which_process_died_and_stops_the_rest(demo, child):
    """PREP-8, PLAT-5 (issue 22): when one of the demo's processes dies (here `kill -9`
    of the demo platform, the worker, or the AT Protocol PDS of `--platform atproto`),
    the demo says which one and how, stops the others and exits non-zero (a killed demo
    platform once stayed a zombie while the console ran on, nothing printed). The
    `pds` case also runs `flask demo --platform atproto`'s start path end to end."""
    demo.start(platform="atproto" if child == "pds" else "demo", timeout=240)
    roles = {"platform", "worker", "pds"} if child == "pds" else {"platform", "worker"}
    try:
        children = eventually(lambda: (found := demo.children()).keys() == roles and found)
    except AssertionError:
        raise AssertionError(f"children {demo.children()} of {demo.process.pid}; {demo.output()[-2000:]}") from None
    name = {"platform": "demo platform", "worker": "worker", "pds": "AT Protocol PDS"}[child]

    family = [*children.values(), *(pid for parent in children.values() for pid in _children_of(parent))]

    os.kill(children[child], signal.SIGKILL)

    assert demo.process.wait(timeout=60) != 0
    assert f"The {name} (pid {children[child]}) was killed by SIGKILL" in demo.output()
    eventually(lambda: not any(_alive(pid) for pid in family), timeout=30)
    assert refused(f"{demo.base}/healthz") and refused(f"{demo.platform}/content")


def test_ctrl_c_to_the_whole_group_is_a_clean_stop_not_a_dead_child(demo):
    """PREP-8 (issue 22): Ctrl-C in a terminal reaches every process of the group at once;
    children ending on it are the stop the person asked for, not a process that died:
    exit status 0 and no "stopping the demo" message."""
    demo.start()
    children = eventually(lambda: (found := demo.children()).keys() == {"platform", "worker"} and found)

    os.killpg(demo.process.pid, signal.SIGINT)

    assert demo.process.wait(timeout=60) == 0, demo.output()[-3000:]
    assert "stopping the demo" not in demo.output()
    eventually(lambda: not any(_alive(pid) for pid in children.values()), timeout=30)
