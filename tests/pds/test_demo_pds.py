"""`flask demo --platform atproto` (SPEC PLAT-5): the setup a new user gets, against the
real PDS, and the clear message when Node cannot be installed."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from app.demo import seed_demo
from app.demo_pds import PDS_SLUG, PdsUnavailable, install_pds, seed_pds_demo, start_pds
from app.domain.queue import QueueFilter
from app.extensions import db
from app.models import Installation, OperatorUser
from app.services.cases.reports import record_decision
from app.services.lifecycle.approval import decide_proposal
from app.services.lifecycle.dispatch import deliver
from app.services.read.queue_pages import queue_page

from ..builders import proposal_of
from .harness import XrpcError


def test_plat5_demo_seeds_an_installation_whose_takedown_hides_the_pds_post(app, pds):
    """PLAT-5: the demo's `pds` installation acts on posts it created on the PDS: a
    moderator's decision approved by a reviewer takes the post down there."""
    seeded = seed_pds_demo(pds, seed_demo)
    uri, _text = seeded["posts"][0]
    assert pds.get_record(uri)["uri"] == uri
    iid = db.session.scalar(select(Installation.id).where(Installation.slug == PDS_SLUG))
    users = {u.email: u for u in db.session.scalars(select(OperatorUser).where(OperatorUser.installation_id == iid))}
    # QUEUE-1: the PDS posts the demo reports are in its queue, one subject each
    queued = {row.reference for row in queue_page(users["pds-moderator@example.com"], QueueFilter()).rows}
    assert {uri for uri, _text in seeded["posts"]} <= queued

    record_decision(
        seeded["report_ids"][0],
        decision_code="remove_content",
        rationale="harassment",
        operator=users["pds-moderator@example.com"],
    )
    proposal = proposal_of(seeded["report_ids"][0])
    decide_proposal(
        proposal.id,
        decision="approved",
        payload_digest=proposal.payload_digest,
        reason=None,
        idempotency_key="pds-demo-approval",
        operator=users["pds-reviewer@example.com"],
    )

    assert deliver(proposal.id).state == "applied"
    with pytest.raises(XrpcError) as gone:
        pds.get_record(uri)
    assert gone.value.error == "RecordNotFound"

    again = seed_pds_demo(pds, seed_demo)  # a second start: same installation, new reports
    assert again["installation_id"] == iid and set(again["report_ids"]).isdisjoint(seeded["report_ids"])


def test_plat5_demo_starts_its_own_pds_through_the_product_code(tmp_path):
    """PLAT-5 (issue 22): `flask demo --platform atproto`'s start path -- install, launch,
    talk XRPC -- works from the product code alone (it once crashed at once, for every
    user, loading the tests' harness without registering it as a module)."""
    pds = start_pds(tmp_path / "pds.log")
    try:
        author = pds.create_account()
        post = pds.create_post(author, "a post the demo made")
        assert pds.get_record(post.uri)["value"]["text"] == "a post the demo made"
    finally:
        assert pds.stop() == 0


def test_plat5_product_code_loads_no_test_code():
    """PLAT-5 (issue 22): nothing under app/ loads a file from tests/ (a product module
    that needs the PDS launcher has it in app/pds_runtime.py)."""
    app_dir = Path(__file__).resolve().parents[2] / "app"
    offenders = [
        str(path.relative_to(app_dir))
        for path in app_dir.rglob("*.py")
        if re.search(r"""["']tests["']|spec_from_file_location""", path.read_text())
    ]
    assert offenders == []


def test_plat5_demo_says_clearly_when_node_cannot_be_installed(tmp_path):
    """PLAT-5: without npm (or the registry) the demo explains what it needs and how to
    run without the PDS, instead of a traceback."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sha256sum", "cut", "dirname", "cat", "ls"):
        os.symlink(shutil.which(tool), tools / tool)
    env = {"PATH": str(tools), "HOME": str(tmp_path), "PDS_HOME": str(tmp_path / "pds")}

    with pytest.raises(PdsUnavailable) as refused:
        install_pds(env)

    message = str(refused.value)
    assert "Node 22 and the AT Protocol PDS could not be installed" in message
    assert "missing tools: npm" in message
    assert "flask --app app demo` without" in message
