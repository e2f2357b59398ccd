"""The demo: seed a working installation and run console, worker and demo platform.

`flask demo` (README's first command) applies migrations, seeds once, then runs the
three processes together until Ctrl-C, which stops all of them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select

from app.demo_dsa import DEMO_DSA_SETTINGS
from app.demo_platform import demo_evidence
from app.domain.dsa_settings import settings_from_json, settings_problems, settings_to_json
from app.domain.evidence import parse_evidence
from app.domain.second_factor import SECOND_FACTOR_ROLES, needs_second_factor
from app.extensions import db
from app.models import (
    Budget,
    ComponentDefinition,
    ComponentVersion,
    Connection,
    ConnectionVersion,
    DsaSettingsVersion,
    Installation,
    Integration,
    Queue,
    Report,
    ReportTarget,
    WorkflowDefinition,
    WorkflowVersion,
)
from app.models.changes import add_settings_version
from app.services.admin.integrations import issue_token
from app.services.admin.operators import create_operator
from app.services.admin.mfa import enrol_operator
from app.domain.clock import utcnow
from app.services.cases.evidence_store import store_evidence
from app.services.cases.queue_subjects import refresh_subjects, subject_for
from app.services.uow import Actor, unit_of_work

DEMO_PASSWORD = "demo-password-1"
DEMO_USERS = (
    ("moderator@example.com", "Maya Moderator", ["moderator"]),
    ("reviewer@example.com", "Rafael Reviewer", ["reviewer"]),
    ("reviewer2@example.com", "Rita Reviewer", ["reviewer", "moderator"]),
    ("admin@example.com", "Ada Admin", ["admin", "reviewer"]),
    ("admin2@example.com", "Arne Admin", ["admin"]),  # the second admin of four-eyes changes (FOUR-2)
    ("auditor@example.com", "Aude Auditor", ["auditor"]),
)
DEMO_POSTS = [f"post:{n}" for n in range(1001, 1007)]


def demo_totp_seed(email: str) -> str:
    """The published TOTP seed of a demo account (OPS-2), like its published password:
    derived from the email, so every demo start (and `python -m app.demo_code`) knows it.
    Only the demo and test builders enrol with it; real accounts get random seeds."""
    digest = hashlib.sha256(f"demo-second-factor:{email.lower()}".encode()).digest()
    return base64.b32encode(digest[:20]).decode()
# Bounded automation needs a budget (SPEC FOUR-3): the demo's allows this many actions an hour.
DEMO_BUDGET = {"limit_amount": 10_000, "window_seconds": 3600}
# A demo suspension lifts itself this many seconds after it is applied (SPEC TEMP-2).
DEMO_SUSPENSION_SECONDS = 180

ACTION_INPUT_SCHEMA = {
    "type": "object",
    "required": ["reason_code", "report_reference"],
    "properties": {
        "reason_code": {"type": "string", "maxLength": 100},
        "report_reference": {"type": "string", "maxLength": 100},
    },
    "additionalProperties": False,
}
# The affected user's notice of a restriction (DSA-4): what the notify_user action carries.
NOTICE_INPUT_SCHEMA = {
    "type": "object",
    "required": ["puid", "language", "subject", "text", "complaint_until"],
    "properties": {
        "puid": {"type": "string", "maxLength": 500},
        "language": {"type": "string", "maxLength": 5},
        "subject": {"type": "string", "maxLength": 500},
        "text": {"type": "string", "maxLength": 20000},
        "complaint_until": {"type": "string", "maxLength": 40},
    },
    "additionalProperties": False,
}
RECEIPT_OUTPUT_SCHEMA = {
    "type": "object",
    "required": ["action_id", "operation_id", "payload_digest", "status"],
    "properties": {"status": {"enum": ["accepted", "applied", "failed"]}},
}


def enforcement_graph(component_version_id: str, restore_version_id: str, approval_mode: str = "human") -> dict:
    """The demo's enforcement workflow: take the reported post down after approval."""
    return {
        "trigger": {"decision_codes": ["remove_content"]},
        "start": "takedown",
        "nodes": {
            "takedown": {
                "type": "action",
                "config": {
                    "component_version_id": component_version_id,
                    "action_code": "takedown",
                    "approval_policy": {"mode": approval_mode},
                    "expiry_seconds": 86400,
                    # An overturned decision is corrected by restoring the post (SPEC CORR).
                    "correction": {
                        "component_version_id": restore_version_id,
                        "action_code": "restore",
                        "payload": "{reason_code: join('_', ['appeal', appeal_decision.outcome]),"
                        " report_reference: report.public_reference}",
                    },
                },
                "input_mapping": {
                    "idempotency_key": "join(':', ['takedown', decision.id])",
                    "target": "{reference: targets[0].target_reference, kind: targets[0].kind}",
                    "payload": "{reason_code: decision.decision_code, report_reference: report.public_reference}",
                    "preconditions": (
                        "{decision_code: decision.decision_code, target_reference: targets[0].target_reference,"
                        " report_state: 'decided'}"
                    ),
                },
                "next": {},
            }
        },
    }


def suspension_graph(suspend_version_id: str, unsuspend_version_id: str, approval_mode: str = "human") -> dict:
    """The demo's suspension workflow: suspend the reported post's author for a few
    minutes after approval; the component plans the ``unsuspend_account`` reversal
    (SPEC TEMP-1), and the input mapping gives it its payload."""
    return {
        "trigger": {"decision_codes": ["suspend_account"]},
        "start": "suspend",
        "nodes": {
            "suspend": {
                "type": "action",
                "config": {
                    "component_version_id": suspend_version_id,
                    "action_code": "suspend_account",
                    "approval_policy": {"mode": approval_mode},
                    "expiry_seconds": 86400,
                    # An overturned suspension is lifted at once; its scheduled reversal is cancelled (TEMP-3).
                    "correction": {
                        "component_version_id": unsuspend_version_id,
                        "action_code": "unsuspend_account",
                        "payload": "{reason_code: join('_', ['appeal', appeal_decision.outcome]),"
                        " report_reference: report.public_reference}",
                    },
                },
                "input_mapping": {
                    "idempotency_key": "join(':', ['suspend', decision.id])",
                    "target": "{reference: targets[0].target_reference, kind: 'author_of'}",
                    "payload": "{reason_code: decision.decision_code, report_reference: report.public_reference}",
                    "reversal_payload": "{reason_code: 'suspension_ended', report_reference: report.public_reference}",
                    "preconditions": "{decision_code: decision.decision_code, report_state: 'decided'}",
                },
                "next": {},
            }
        },
    }


def _component(
    s, iid: str, conn_version_id: str, slug: str, name: str, path: str, approval_mode: str, **extra
):  # extra: other ComponentVersion columns (temporary, input_schema)
    extra.setdefault("input_schema", ACTION_INPUT_SCHEMA)
    definition = ComponentDefinition(
        installation_id=iid, name=name, slug=slug, effect_class="side_effecting", status="active"
    )
    s.add(definition)
    s.flush()
    version = ComponentVersion(
        installation_id=iid,
        definition_id=definition.id,
        version=1,
        implementation_kind="webhook",
        implementation_reference=f"POST {path}",
        connection_version_id=conn_version_id,
        output_schema=RECEIPT_OUTPUT_SCHEMA,
        approval_policy={"mode": approval_mode},
        **extra,
    )
    s.add(version)
    s.flush()
    return version.id


@dataclass(frozen=True)
class DemoSecrets:
    signing_secret: str
    platform_token: str
    console_token: str | None


def _seed_dsa_settings(s, iid: str) -> DsaSettingsVersion:
    """Version 1 of the demo installation's DSA settings (DSA-1), as the seed writes
    it: the document is checked for shape only, since the notice component it names
    may be seeded after it."""
    problems = settings_problems(DEMO_DSA_SETTINGS)
    if problems:
        raise ValueError(f"the demo's DSA settings are wrong: {problems}")
    document = settings_to_json(settings_from_json(DEMO_DSA_SETTINGS))
    return add_settings_version(s, DsaSettingsVersion, iid, document)


def seed_demo(platform_url: str, *, approval_mode: str = "human", slug: str = "demo", dsa: bool = True) -> DemoSecrets:
    """Create the demo installation once; later calls return its secrets.

    The seed writes its rows directly, as the system (audit actor ``system:demo-seed``,
    one ``installation.seeded`` row naming what it created), before any admin
    exists: like ``flask create-admin`` it bootstraps an installation, and the
    four-eyes rule for configuration (SPEC FOUR-2) governs what admins change from
    then on. A bounded_auto demo gets a budget, so its automation is bounded (FOUR-3).
    With `dsa`, the demo's DSA settings (`app.demo_dsa.DEMO_DSA_SETTINGS`) are version
    1 of its DSA settings (DSA-1), written as the rest of the seed; the notice
    component they name is the seed's to create too.

    Args:
        platform_url: the demo platform's base URL, e.g. ``http://127.0.0.1:5050``.
        approval_mode: ``human`` (maker/checker) or ``bounded_auto``.
        slug: the installation's slug (tests seed several).
        dsa: put the demo's DSA settings in force (tests' worlds start with DSA off
            and put settings in force with ``tests.builders.set_dsa_settings``).
    """
    installation = db.session.scalar(select(Installation).where(Installation.slug == slug))
    if installation is not None:
        version = db.session.scalar(
            select(ConnectionVersion).where(ConnectionVersion.installation_id == installation.id)
        )
        return DemoSecrets(version.signing_secret, version.bearer_token, None)
    import base64

    signing_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    platform_token = secrets.token_urlsafe(24)
    system = Actor.system("demo-seed")
    with unit_of_work() as uow:
        s = uow.session
        installation = Installation(name="Demo Trust & Safety team", slug=slug)
        s.add(installation)
        s.flush()
        iid = installation.id
        queue = Queue(installation_id=iid, name="General", slug="general")
        s.add(queue)
        s.flush()
        integration = Integration(
            installation_id=iid, name="Demo platform", slug="demo-platform", default_queue_id=queue.id
        )
        s.add(integration)
        s.flush()
        connection = Connection(
            installation_id=iid, integration_id=integration.id, name="Demo platform API", slug="demo-platform-api"
        )
        s.add(connection)
        s.flush()
        host = platform_url.split("//", 1)[1].split(":")[0].split("/")[0]
        conn_version = ConnectionVersion(
            installation_id=iid,
            connection_id=connection.id,
            version=1,
            base_url=platform_url,
            bearer_token=platform_token,
            signing_secret=signing_secret,
            timeout_seconds=10,
            allowed_hosts=sorted({host, "127.0.0.1", "localhost"}),
        )
        s.add(conn_version)
        s.flush()
        versions = {}
        for slug_, name, path in (
            ("takedown", "Take down content", "/actions/takedown"),
            ("restore", "Restore content", "/actions/restore"),
            ("unsuspend_account", "Lift an account suspension", "/actions/unsuspend"),
        ):
            versions[slug_] = _component(s, iid, conn_version.id, slug_, name, path, approval_mode)
        # The affected user's notice of a restriction (DSA-4), sent under the restriction's approval.
        versions["notify_user"] = _component(
            s, iid, conn_version.id, "notify_user", "Notify the affected user", "/actions/notify", approval_mode,
            input_schema=NOTICE_INPUT_SCHEMA,
        )
        # A temporary action: suspended for a few minutes, then lifted by its reversal (TEMP-1).
        versions["suspend_account"] = _component(
            s,
            iid,
            conn_version.id,
            "suspend_account",
            "Suspend the author's account",
            "/actions/suspend",
            approval_mode,
            temporary={
                "duration_seconds": DEMO_SUSPENSION_SECONDS,
                "reversal": {
                    "component_version_id": versions["unsuspend_account"],
                    "action_code": "unsuspend_account",
                    "payload": {"reason_code": "suspension_ended", "report_reference": "R-DEMO"},
                },
            },
        )
        workflow = WorkflowDefinition(installation_id=iid, name="Enforcement", slug="enforcement")
        s.add(workflow)
        s.flush()
        workflow_version = WorkflowVersion(
            installation_id=iid,
            definition_id=workflow.id,
            version=1,
            authority_mode="bounded_auto" if approval_mode == "bounded_auto" else "assist",
            graph=enforcement_graph(versions["takedown"], versions["restore"], approval_mode),
        )
        s.add(workflow_version)
        s.flush()
        suspension = WorkflowDefinition(installation_id=iid, name="Account suspension", slug="suspension")
        s.add(suspension)
        s.flush()
        suspension_version = WorkflowVersion(
            installation_id=iid,
            definition_id=suspension.id,
            version=1,
            authority_mode=workflow_version.authority_mode,
            graph=suspension_graph(versions["suspend_account"], versions["unsuspend_account"], approval_mode),
        )
        s.add(suspension_version)
        s.flush()
        budget = None
        if approval_mode == "bounded_auto":
            budget = Budget(
                installation_id=iid,
                scope_type="workflow",
                scope_id=workflow_version.id,
                metric="actions",
                used_amount=0,
                active=True,
                **DEMO_BUDGET,
            )
            s.add(budget)
            s.add(
                Budget(
                    installation_id=iid,
                    scope_type="workflow",
                    scope_id=suspension_version.id,
                    metric="actions",
                    used_amount=0,
                    active=True,
                    **DEMO_BUDGET,
                )
            )
            s.flush()
        for n, ref in enumerate(DEMO_POSTS, start=1):
            report = Report(
                installation_id=iid,
                integration_id=integration.id,
                queue_id=queue.id,
                external_id=f"demo-report-{n}",
                public_reference=f"R-DEMO{n:02d}",
                state="open",
                policy_version_id="policy-2026-11",
                category="harassment",
                reason="harassment",
                summary=f"Users reported {ref} for harassment.",
                subject_id=subject_for(s, iid, ref, utcnow()).id,  # its row in the queue (QUEUE-1)
            )
            s.add(report)
            s.flush()
            target = ReportTarget(installation_id=iid, report_id=report.id, target_reference=ref, kind="post")
            s.add(target)
            s.flush()
            evidence = demo_evidence(ref, platform_url)  # what the platform sends with its reports (REV-1)
            if evidence:
                store_evidence(s, target, parse_evidence(evidence))
            refresh_subjects(s, [report.subject_id])
        dsa_version = _seed_dsa_settings(s, iid) if dsa else None
        uow.audit(
            iid,
            f"demo-seeded:{iid}",
            "installation.seeded",
            system,
            "installation",
            iid,
            {
                "slug": slug,
                "approval_mode": approval_mode,
                "connection_version_id": conn_version.id,
                "component_version_ids": versions,
                "workflow_version_id": workflow_version.id,
                "suspension_workflow_version_id": suspension_version.id,
                "budget_id": budget.id if budget else None,
                "dsa_settings_version_id": dsa_version.id if dsa_version else None,
            },
        )
        integration_id = integration.id
        uow.commit()
    for email, name, roles in DEMO_USERS:
        operator = create_operator(
            iid,
            email=email if slug == "demo" else f"{slug}-{email}",
            password=DEMO_PASSWORD,
            display_name=name,
            roles=roles,
            actor=system,
        )
        if needs_second_factor(operator):  # OPS-2: enrolled with the published demo seed
            enrol_operator(operator.id, demo_totp_seed(operator.email), actor=system)
    token = issue_token(integration_id, label="demo platform async results", actor=system)
    return DemoSecrets(signing_secret, platform_token, token.token)


def _start_pds_demo(app):
    """Start the PDS and seed the ``pds`` installation for it (PLAT-5), or exit with why not."""
    from app.demo_pds import PdsUnavailable, seed_pds_demo, start_pds

    print("  Starting an AT Protocol PDS (the first run installs Node 22 and the PDS, a few minutes) ...", flush=True)
    try:
        pds = start_pds(Path(app.instance_path) / "pds.log")
    except PdsUnavailable as error:
        print(f"\n{error}\n", file=sys.stderr, flush=True)
        raise SystemExit(2) from error
    seed_pds_demo(pds, seed_demo)
    return pds


def _interrupt(*_args) -> None:
    raise KeyboardInterrupt


def describe_exit(returncode: int) -> str:
    """How a child process ended, for the person running the demo.

    Args:
        returncode: ``Popen.returncode`` (negative: the number of the signal that killed it).

    Returns:
        ``"was killed by SIGKILL"`` or ``"exited with status 3"``.
    """
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class _ChildWatch:
    """Waits on each of the demo's child processes (demo platform, worker, PDS) in a
    thread of its own, so none is left a zombie: the first that exits while the demo
    runs (and not within `STOP_GRACE_SECONDS` of a stop the person asked for) is named
    on standard error with how it ended, and the console server is shut down, which
    stops the rest (the demo then exits with status 1)."""

    # Ctrl-C reaches every process of the terminal's group at once: a child may end on
    # it before the demo itself has handled it. That is the asked-for stop, not a death.
    STOP_GRACE_SECONDS = 1.0

    def __init__(self, server) -> None:
        self.server = server
        self.died: str | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._stop_requested = threading.Event()

    def watch(self, name: str, process: subprocess.Popen) -> None:
        """Wait for `process` (called `name` in the message) in a daemon thread."""
        threading.Thread(target=self._wait, args=(name, process), name=f"demo-watch-{name}", daemon=True).start()

    def stop(self) -> None:
        """The demo is stopping: exits from now on are expected, not reported."""
        with self._lock:
            self._stopping = True
        self._stop_requested.set()

    def _wait(self, name: str, process: subprocess.Popen) -> None:
        returncode = process.wait()
        if self._stop_requested.wait(self.STOP_GRACE_SECONDS):
            return  # ended by the same Ctrl-C that stops the demo (its status says nothing)
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            self.died = name
        print(
            f"\n  The {name} (pid {process.pid}) {describe_exit(returncode)}; stopping the demo.\n",
            file=sys.stderr,
            flush=True,
        )
        self.server.shutdown()


def _port_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:`port` now."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_demo(app, console_port: int, platform_port: int, platform: str = "demo") -> None:
    """Migrate, seed, and run console + worker + demo platform until Ctrl-C, or until
    one of its processes dies: it is named with how it ended, and the rest stop.

    Args:
        platform: ``demo`` (the demo platform only) or ``atproto`` (also a real AT
            Protocol PDS on loopback and the ``pds`` installation acting on it, PLAT-5).

    Raises:
        SystemExit: 2 with a clear message when ``atproto`` cannot install or start the PDS;
            1 after a child process (demo platform, worker, PDS) died while the demo ran.
    """
    from flask_migrate import upgrade
    from werkzeug.serving import make_server

    from app.queueing import redis_url

    if "LOG_FORMAT" not in os.environ:  # people read the demo's logs: plain text
        from app.observability import configure_logging

        configure_logging("web", app.config["LOG_LEVEL"], "text")
        os.environ["LOG_FORMAT"] = "text"
    upgrade()
    platform_url = f"http://127.0.0.1:{platform_port}"
    console_url = f"http://127.0.0.1:{console_port}"
    secrets_file = Path(app.instance_path) / "demo-secrets.json"
    demo_secrets = seed_demo(platform_url)
    from app.demo_queue import seed_queue_demo

    seed_queue_demo()
    if demo_secrets.console_token:
        secrets_file.write_text(json.dumps(demo_secrets.__dict__))
    saved = json.loads(secrets_file.read_text()) if secrets_file.exists() else demo_secrets.__dict__
    env = {
        **os.environ,
        "REDIS_URL": redis_url(app),
        "EGRESS_ALLOW_PRIVATE": "1",
        "DEMO_PLATFORM_SIGNING_SECRET": saved["signing_secret"],
        "DEMO_PLATFORM_BEARER_TOKEN": saved["platform_token"],
        "DEMO_CONSOLE_URL": console_url,
        "DEMO_CONSOLE_TOKEN": saved.get("console_token") or "",
        "INSTANCE_PATH": app.instance_path,
    }
    root = Path(__file__).resolve().parent.parent
    app.config["EGRESS_ALLOW_PRIVATE"] = True
    # Bind the console's port first: a port in use stops the command here, before it
    # starts a worker or a platform that would outlive it.
    server = make_server("127.0.0.1", console_port, app, threaded=True)
    if not _port_free(platform_port):  # the same for the platform's: no console without it
        server.server_close()
        print(
            f"Port {platform_port} (the demo platform's) is in use by another program. "
            "Stop that program or choose another port with --platform-port.",
            file=sys.stderr,
        )
        raise SystemExit(1)
    pds = _start_pds_demo(app) if platform == "atproto" else None
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "app.demo_platform", "--port", str(platform_port), "--posts", ",".join(DEMO_POSTS)],
            env=env,
            cwd=root,
        ),
        subprocess.Popen([sys.executable, str(root / "worker.py")], env=env, cwd=root),
    ]
    print(f"\n  Console:        {console_url}  (log in as below)")
    print(f"  Demo platform:  {platform_url}/content")
    for email, _name, roles in DEMO_USERS:
        print(f"    {email:24} {DEMO_PASSWORD}   {', '.join(roles)}")
    print("  Reviewers and admins also need a code (OPS-2): add their seed to an authenticator app,")
    print(f"  or print a current code with: {sys.executable} -m app.demo_code <email>")
    for email, _name, roles in DEMO_USERS:
        if set(roles) & SECOND_FACTOR_ROLES:
            print(f"    {email:24} seed {demo_totp_seed(email)}")
    if pds is not None:
        print(f"  AT Protocol PDS: {pds.url}  (installation 'pds'; users pds-<name>@example.com, same password)")
        print("    Its reports are about posts on this PDS; a takedown there hides the post from")
        print(f"    {pds.url}/xrpc/com.atproto.repo.getRecord")
    print("  Press Ctrl-C to stop everything.\n", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    watch = _ChildWatch(server)
    for name, child in zip(("demo platform", "worker"), children, strict=True):
        watch.watch(name, child)
    if pds is not None:
        watch.watch("AT Protocol PDS", pds.process)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        watch.stop()
        server.server_close()
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
        if pds is not None:
            pds.stop()
        if not app.config.get("REDIS_URL"):  # the embedded Redis this command started
            from app.queueing import embedded_redis

            embedded_redis(app.config["EMBEDDED_REDIS_PATH"]).shutdown(save=True)
    if watch.died is not None:
        raise SystemExit(1)
