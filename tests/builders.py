"""Test builders: make the world a test needs, in a line (CTFd style)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rq import SimpleWorker
from sqlalchemy import select

from app.demo import DEMO_PASSWORD, seed_demo
from app.demo_platform import create_platform, platform_state, serve
from app.domain.digests import canonical_json
from app.extensions import db
from app.models import (
    ActionProposal,
    ComponentDefinition,
    ComponentVersion,
    ConnectionVersion,
    Installation,
    Integration,
    OperatorUser,
    Report,
    WorkflowVersion,
)
from app.queueing import delivery_queue, get_redis
from app.services.uow import unit_of_work

from .conftest import csrf_from


@dataclass
class World:
    installation_id: str
    integration_id: str
    workflow_version_id: str
    components: dict[str, str]  # slug -> component version id
    connection_version_id: str
    report_ids: list[str]
    users: dict[str, str] = field(default_factory=dict)  # short name -> operator id
    console_token: str | None = None
    signing_secret: str | None = None
    platform_token: str | None = None

    def user(self, name: str) -> OperatorUser:
        return db.session.get(OperatorUser, self.users[name])


def make_world(platform_url: str, approval_mode: str = "human", slug: str = "demo") -> World:
    """The demo installation: users, integration, takedown/restore, workflow, reports."""
    secrets = seed_demo(platform_url, approval_mode=approval_mode, slug=slug)
    installation = db.session.scalar(select(Installation).where(Installation.slug == slug))
    iid = installation.id
    components = {
        d.slug: v.id
        for d, v in db.session.execute(
            select(ComponentDefinition, ComponentVersion)
            .join(ComponentVersion, ComponentVersion.definition_id == ComponentDefinition.id)
            .where(ComponentDefinition.installation_id == iid)
        )
    }
    users = {
        u.email.split("@")[0].removeprefix(f"{slug}-"): u.id
        for u in db.session.scalars(select(OperatorUser).where(OperatorUser.installation_id == iid))
    }
    return World(
        installation_id=iid,
        integration_id=db.session.scalar(select(Integration.id).where(Integration.installation_id == iid)),
        workflow_version_id=db.session.scalar(select(WorkflowVersion.id).where(WorkflowVersion.installation_id == iid)),
        components=components,
        connection_version_id=db.session.scalar(
            select(ConnectionVersion.id).where(ConnectionVersion.installation_id == iid)
        ),
        report_ids=list(
            db.session.scalars(select(Report.id).where(Report.installation_id == iid).order_by(Report.public_reference))
        ),
        users=users,
        console_token=secrets.console_token,
        signing_secret=secrets.signing_secret,
        platform_token=secrets.platform_token,
    )


def set_graph(world: World, mutate) -> None:
    """Edit the enforcement workflow's graph in place (tests of node configuration)."""
    with unit_of_work() as uow:
        version = uow.session.get(WorkflowVersion, world.workflow_version_id)
        graph = version.graph
        mutate(graph)
        version.graph_json = canonical_json(graph)
        uow.commit()


def set_row(model, row_id: str, **values) -> None:
    """Change columns of a row directly (time travel, fault setup)."""
    with unit_of_work() as uow:
        row = uow.session.get(model, row_id)
        for key, value in values.items():
            setattr(row, key, value)
        uow.commit()


def run_worker(app, with_scheduler: bool = False) -> None:
    """Run every queued job now, in this process (RQ SimpleWorker, burst mode)."""
    worker = SimpleWorker([delivery_queue(app)], connection=get_redis(app))
    worker.work(burst=True, with_scheduler=with_scheduler, logging_level="WARNING")


def proposal_of(report_id: str) -> ActionProposal | None:
    db.session.rollback()
    return db.session.scalar(
        select(ActionProposal).where(ActionProposal.report_id == report_id).order_by(ActionProposal.created_at.desc())
    )


def login(client, email: str, password: str = DEMO_PASSWORD) -> str:
    """Sign in through the login form; returns the session's CSRF token."""
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"email": email, "password": password, "csrf_token": token})
    assert response.status_code == 303, response.get_data(as_text=True)[:500]
    return csrf_from(client.get("/proposals").get_data(as_text=True))


def logout(client, token: str) -> None:
    client.post("/logout", data={"csrf_token": token})


class Platform:
    """The demo platform on a loopback port, with its state for assertions."""

    def __init__(self, posts=("post:1001", "post:1002", "post:1003", "post:1004", "post:1005", "post:1006")):
        self.app = create_platform(posts=list(posts))
        self.server, self.url = serve(self.app)
        self.state = platform_state(self.app)

    def configure_for(self, world: World, console_url: str | None = None) -> None:
        self.state.configure(
            signing_secret=world.signing_secret,
            bearer_token=world.platform_token,
            console_url=console_url,
            console_token=world.console_token,
        )

    def close(self) -> None:
        self.server.shutdown()


def decide_report(world: World, report_index: int = 0, code: str = "remove_content", maker: str = "moderator"):
    """A moderator's decision through the service; returns the proposal it made (or None)."""
    from app.services.cases.reports import record_decision

    report_id = world.report_ids[report_index]
    record_decision(report_id, decision_code=code, rationale="test", operator=world.user(maker))
    return proposal_of(report_id)


def approve(world: World, proposal, reviewer: str = "reviewer", decision: str = "approved", key: str | None = None):
    from app.services.lifecycle.approval import decide_proposal

    return decide_proposal(
        proposal.id,
        decision=decision,
        payload_digest=proposal.payload_digest,
        reason=None,
        idempotency_key=key or f"{reviewer}-{abs(hash(proposal.id))}-{decision}",
        operator=world.user(reviewer),
    )


def reload(proposal) -> ActionProposal:
    db.session.rollback()
    return db.session.get(ActionProposal, proposal.id)


def point_connection_at(
    world: World, base_url: str, timeout_seconds: float = 5, allowed=("127.0.0.1", "localhost")
) -> None:
    """Send the world's actions to another platform (pytest-httpserver)."""
    set_row(
        ConnectionVersion,
        world.connection_version_id,
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        allowed_hosts_json=canonical_json(list(allowed)),
    )


def make_due(proposal) -> None:
    """Time travel: the proposal's next attempt (or its lease expiry) is now due."""
    from datetime import timedelta

    from app.domain.clock import utcnow

    past = utcnow() - timedelta(seconds=1)
    row = reload(proposal)
    values = {"next_attempt_at": past}
    if row.state == "applying":
        values["lease_expires_at"] = past
    set_row(ActionProposal, proposal.id, **values)


def add_reports(world: World, count: int, prefix: str = "extra") -> list[str]:
    """More open reports (each about its own post) through the intake service."""
    from app.services.cases.reports import intake_report

    ids = []
    for n in range(count):
        result = intake_report(
            {"external_id": f"{prefix}-{n}", "targets": [{"reference": f"post:{prefix}-{n}", "kind": "post"}]},
            world.integration_id,
        )
        ids.append(result.report_id)
    world.report_ids.extend(ids)
    return ids


def add_report_with_evidence(world: World, external_id: str, reference: str, **evidence) -> str:
    """An open report on `reference` whose target carries evidence (REV-1), through intake."""
    from app.services.cases.reports import intake_report

    target = {"reference": reference, "kind": "post"}
    if evidence:
        target["evidence"] = evidence
    result = intake_report({"external_id": external_id, "targets": [target]}, world.integration_id)
    world.report_ids.append(result.report_id)
    return result.report_id


def decide(world: World, report_id: str, code: str = "remove_content", maker: str = "moderator"):
    """A moderator's decision on a report by id; returns the newest proposal of the report."""
    from app.services.cases.reports import record_decision

    record_decision(report_id, decision_code=code, rationale="test", operator=world.user(maker))
    return proposal_of(report_id)
