"""Test builders: make the world a test needs, in a line (CTFd style)."""

from __future__ import annotations

import copy
import itertools
import threading
from dataclasses import dataclass, field

from rq import SimpleWorker
from sqlalchemy import select

from app.demo import DEMO_BUDGET, DEMO_PASSWORD, seed_demo
from app.demo_platform import create_platform, platform_state, serve
from app.domain.second_factor import needs_second_factor
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
    WorkflowDefinition,
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
    # DSA-1: a test world starts with DSA off; `set_dsa_settings` puts settings in force
    secrets = seed_demo(platform_url, approval_mode=approval_mode, slug=slug, dsa=False)
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
        workflow_version_id=db.session.scalar(
            select(WorkflowVersion.id)
            .join(WorkflowDefinition, WorkflowDefinition.id == WorkflowVersion.definition_id)
            .where(WorkflowVersion.installation_id == iid, WorkflowDefinition.slug == "enforcement")
        ),
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
        graph = copy.deepcopy(version.graph)  # a JSON column's value is never changed in place
        mutate(graph)
        version.graph = graph
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


# --- the second factor (OPS-2): seeds the helpers know ------------------------------

_SEEDS: dict[str, str] = {}  # seeds read off the enrolment page, by email


def totp_seed(email: str) -> str:
    """The TOTP seed test builders enrol an operator with: the demo's, derived from
    the email, so every helper that signs them in knows it (the demo seed enrols
    its reviewers and admins with it too)."""
    from app.demo import demo_totp_seed

    return _SEEDS.get(email.lower()) or demo_totp_seed(email)


def totp_code(email: str, *, seed: str | None = None) -> str:
    """A current code of the operator's seed that the console has not accepted yet.

    A code is accepted once (OPS-2): the step after the last one used, within the
    window of one step either side of now; when the window is used up (a test signing
    the same operator in more than twice in 30 s), wait for the next step.
    """
    import time

    import pyotp

    from app.domain.second_factor import STEP_SECONDS, WINDOW_STEPS

    db.session.rollback()
    operator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == email.lower()))
    last = operator.totp_last_step if operator is not None else None
    totp = pyotp.TOTP(seed or totp_seed(email))
    while True:
        now = time.time()
        step = int(now // STEP_SECONDS)
        earliest = step if now % STEP_SECONDS > STEP_SECONDS - 5 else step - WINDOW_STEPS  # not about to expire
        wanted = max(earliest, (last or 0) + 1)
        if wanted <= step + WINDOW_STEPS:
            return totp.at(wanted * STEP_SECONDS)
        time.sleep((wanted - WINDOW_STEPS) * STEP_SECONDS - now + 0.05)


def enrol(email: str) -> list[str]:
    """Enrol the operator with `totp_seed(email)` (their recovery codes, as shown)."""
    from app.services.admin.mfa import enrol_operator
    from app.services.uow import Actor

    operator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == email.lower()))
    return enrol_operator(operator.id, totp_seed(email), actor=Actor.system("test-builder"))


def pass_second_factor(client, response, email: str):
    """Finish a sign-in whose password step answered `response` (a Flask test client's):
    the code page with a current code, or the enrolment page with the seed it shows
    (remembered for the next sign-in). Other answers are given back as they are."""
    import html
    import re

    location = response.headers.get("Location", "") if response.status_code == 303 else ""
    if location.endswith("/login/enrol"):
        page = client.get("/login/enrol").get_data(as_text=True)
        seed = re.search(r'class="totp-seed">([A-Z2-7]+)<', page).group(1)
        _SEEDS[email.lower()] = seed
        done = client.post("/login/enrol", data={"code": totp_code(email), "csrf_token": csrf_from(page)})
        assert done.status_code == 200, done.get_data(as_text=True)[:500]
        next_url = html.unescape(re.search(r'href="([^"]+)">I have saved them', done.get_data(as_text=True)).group(1))
        return _redirect_to(next_url)
    if location.endswith("/login/second-factor"):
        page = client.get("/login/second-factor").get_data(as_text=True)
        return client.post("/login/second-factor", data={"code": totp_code(email), "csrf_token": csrf_from(page)})
    return response


class _redirect_to:  # noqa: N801 - stands for the 303 the enrolment page's link is
    status_code = 303

    def __init__(self, location: str) -> None:
        self.headers = {"Location": location}


def http_sign_in(session, base: str, email: str, password: str = DEMO_PASSWORD):
    """Sign in over HTTP (a `requests.Session` on a served console, another process's
    database): the password, then the code page with a code of `totp_seed(email)`
    when the account needs one (OPS-2). A code refused (its step used by an earlier
    sign-in) is retried from the password at the next step. Returns the last answer
    (303 when signed in)."""
    import time

    import pyotp

    from app.domain.second_factor import STEP_SECONDS

    for attempt in range(3):
        token = csrf_from(session.get(f"{base}/login").text)
        response = session.post(
            f"{base}/login",
            data={"email": email, "password": password, "csrf_token": token},
            allow_redirects=False,
        )
        if not response.headers.get("Location", "").endswith("/login/second-factor"):
            return response
        page = session.get(f"{base}/login/second-factor").text
        response = session.post(
            f"{base}/login/second-factor",
            data={"code": pyotp.TOTP(totp_seed(email)).now(), "csrf_token": csrf_from(page)},
            allow_redirects=False,
        )
        if response.status_code != 401:
            return response
        time.sleep(STEP_SECONDS - time.time() % STEP_SECONDS + 0.1)  # the next step's code is unused
    return response


def login(client, email: str, password: str = DEMO_PASSWORD) -> str:
    """Sign in through the login form, and the second step when the account needs it
    (OPS-2); returns the session's CSRF token."""
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"email": email, "password": password, "csrf_token": token})
    response = pass_second_factor(client, response, email)
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
    """Send the world's actions to another platform (pytest-httpserver), as if it had
    been there from the start: the proposals already made state it as their approved
    delivery (FOUR-5; `restate_deliveries`)."""
    set_row(
        ConnectionVersion,
        world.connection_version_id,
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        allowed_hosts=list(allowed),
    )
    restate_deliveries(world.installation_id)


def restate_deliveries(installation_id: str) -> None:
    """Time travel for FOUR-5: each proposal of the installation states the delivery in
    force now as the one it was prepared with (its digest is left as it was). For tests
    that rewire a connection or a component after proposals exist; a test of FOUR-5
    itself changes the rows with `set_row` alone."""
    from app.domain.proposal.destination import delivery_fields, describe
    from app.services.lifecycle.action_targets import destination_of

    with unit_of_work() as uow:
        rows = uow.session.scalars(
            select(ActionProposal).where(
                ActionProposal.installation_id == installation_id, ActionProposal.delivery.is_not(None)
            )
        ).all()
        for row in rows:
            component = uow.session.get(ComponentVersion, row.component_version_id)
            row.delivery = describe(
                destination_of(uow.session, component), delivery_fields(row.id, row.operation_id, row.target)
            )
        uow.commit()


def waits_between(when, before, low: float, high: float) -> bool:
    """Whether `when` lies `low` to `high` seconds after a moment between `before`
    and now (the moment the code under test decided it, however slow the machine)."""
    from datetime import timedelta

    from app.domain.clock import utcnow

    return before + timedelta(seconds=low) < when < utcnow() + timedelta(seconds=high)


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
    pass_connection_waits(past)


def pass_connection_waits(past=None) -> None:
    """Time travel for the connections too: every breaker's probe time, probe lease and
    429 pause has come (CONN-1, CONN-2); a disabled endpoint stays disabled (CONN-3)."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.domain.clock import utcnow
    from app.models import ConnectionHealth

    past = past or utcnow() - timedelta(seconds=1)
    with unit_of_work() as uow:
        for column in ("next_probe_at", "probe_lease_expires_at", "paused_until"):
            field = getattr(ConnectionHealth, column)
            uow.session.execute(update(ConnectionHealth).where(field > past).values({column: past}))
        uow.commit()


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


# -- Per-entity builders ---------------------------------------------------------------
#
# Each builds one entity through the services a user or a platform would call
# (intake, decision, approval, the delivery job against a loopback platform, the
# sweeps), never by writing state columns, so a test states only what it needs.
# The one stand-in is the clock: reaching a later attempt or a timeout moves a
# deadline into the past (`make_due`, `_expire_wait`), as time passing would.

OPERATOR_ROLES = {
    "admin2": ["admin"],  # the second admin of four-eyes configuration changes (FOUR-2)
    "moderator": ["moderator"],
    "reviewer": ["reviewer"],
    "reviewer2": ["reviewer", "moderator"],
    "admin": ["admin", "reviewer"],
    "auditor": ["auditor"],
}
NO_PLATFORM_URL = "http://127.0.0.1:9"  # the discard port: nothing answers
_serial = itertools.count(1)


@dataclass
class Team:
    """A minimal installation: the five operators of `OPERATOR_ROLES`, one queue, one
    integration, one connection, the takedown and restore components and one
    enforcement workflow."""

    installation_id: str
    slug: str
    integration_id: str
    queue_id: str
    connection_version_id: str
    components: dict[str, str]  # slug -> component version id
    workflow_version_id: str
    platform: Platform | str | None = None

    def user(self, name: str) -> OperatorUser:
        return make_operator(self.installation_id, name)

    @property
    def demo_platform(self) -> Platform:
        assert isinstance(self.platform, Platform), "this state needs the demo platform: make_team(platform)"
        return self.platform


def _approved(result, installation_id: str):
    """A change the team's admin made, approved by its second admin when it waits for
    one (FOUR-2: bounded automation); the ids it created."""
    from app.services.admin.changes import PendingChange
    from app.services.admin.reviews import approve_change

    if not isinstance(result, PendingChange):
        return result
    created = approve_change(make_operator(installation_id, "admin2"), result.change_id, result.digest)
    return created["definition_id"], created["version_id"]


def applied(result, installation_id: str) -> dict:
    """A change the team's admin proposed, approved by its second admin (FOUR-4: every
    configuration write waits for one); what applying it created."""
    from app.services.admin.changes import PendingChange
    from app.services.admin.reviews import approve_change

    assert isinstance(result, PendingChange), f"expected a pending change, got {result!r}"
    return approve_change(make_operator(installation_id, "admin2"), result.change_id, result.digest)


def make_operator(installation_id: str, name: str = "moderator", roles: list[str] | None = None) -> OperatorUser:
    """The installation's operator called `name` (created through the operators
    service on first use); roles default to `OPERATOR_ROLES[name]`."""
    from app.services.admin.operators import create_operator
    from app.services.uow import Actor

    slug = db.session.get(Installation, installation_id).slug
    email = f"{name}@{slug}.example.com"
    existing = db.session.scalar(select(OperatorUser).where(OperatorUser.email == email))
    if existing is not None:
        return existing
    operator = create_operator(
        installation_id,
        email=email,
        password=DEMO_PASSWORD,
        display_name=name.title(),
        roles=roles or OPERATOR_ROLES[name],
        actor=Actor.system("test-builder"),
    )
    if needs_second_factor(operator):  # OPS-2: enrolled with a seed the helpers know
        enrol(email)
        operator = db.session.get(OperatorUser, operator.id)
    return operator


def make_team(platform: Platform | str | None = None, *, approval_mode: str = "human", edit_graph=None) -> Team:
    """A new installation configured through the admin services.

    Args:
        platform: the demo `Platform` (its secrets are set to the connection's), a
            base URL (pytest-httpserver), or None (nothing answers).
        approval_mode: ``human`` or ``bounded_auto`` (components and workflow).
        edit_graph: called with the enforcement graph (a dict) before it is saved.
    """
    import json

    from app.demo import ACTION_INPUT_SCHEMA, RECEIPT_OUTPUT_SCHEMA, enforcement_graph
    from app.models import Queue
    from app.services.admin.components import ComponentSpec, create_component
    from app.services.admin.connection_create import create_connection
    from app.services.admin.connections import ConnectionSettings
    from app.services.admin.integrations import create_integration
    from app.services.admin.workflows import create_workflow

    n = next(_serial)
    slug = f"team{n}"
    with unit_of_work() as uow:  # no service creates installations and queues (the CLI and the seed write them)
        installation = Installation(name=f"Team {n}", slug=slug)
        uow.session.add(installation)
        uow.session.flush()
        queue = Queue(installation_id=installation.id, name="General", slug="general")
        uow.session.add(queue)
        uow.commit()
    for name in OPERATOR_ROLES:  # made now, so a test's before/after counts see none appear
        make_operator(installation.id, name)
    admin = make_operator(installation.id, "admin")
    integration_id = create_integration(admin, name="Platform", slug="platform", default_queue_id=queue.id)
    url = platform.url if isinstance(platform, Platform) else platform or NO_PLATFORM_URL
    bearer = f"platform-token-{n}"
    proposed = create_connection(
        admin,
        name="Platform API",
        slug="platform-api",
        integration_id=integration_id,
        settings=ConnectionSettings(
            base_url=url,
            bearer_token_action="set",
            bearer_token=bearer,
            signing_secret_action="generate",
            timeout_seconds=5,
            allowed_hosts="127.0.0.1 localhost",
        ),
    )
    connection = applied(proposed, installation.id)
    if isinstance(platform, Platform):
        platform.state.configure(signing_secret=proposed.shown_once["signing_secret"], bearer_token=bearer)
    components = {}
    for action, name in (("takedown", "Take down content"), ("restore", "Restore content")):
        spec = ComponentSpec(
            implementation_kind="webhook",
            implementation_reference=f"POST /actions/{action}",
            connection_version_id=connection["version_id"],
            input_schema=json.dumps(ACTION_INPUT_SCHEMA),
            output_schema=json.dumps(RECEIPT_OUTPUT_SCHEMA),
            approval_mode=approval_mode,
        )
        components[action] = _approved(create_component(admin, name=name, slug=action, spec=spec), installation.id)[1]
    graph = enforcement_graph(components["takedown"], components["restore"], approval_mode)
    if edit_graph is not None:
        edit_graph(graph)
    _, workflow_version_id = _approved(
        create_workflow(
            admin,
            name="Enforcement",
            slug="enforcement",
            authority_mode="bounded_auto" if approval_mode == "bounded_auto" else "assist",
            graph=json.dumps(graph),
            active=True,
        ),
        installation.id,
    )
    if approval_mode == "bounded_auto":  # FOUR-3: bounded automation needs a budget
        from app.services.admin.budgets import create_budget

        applied(
            create_budget(admin, scope_type="workflow", scope_id=workflow_version_id, **DEMO_BUDGET), installation.id
        )
    return Team(
        installation_id=installation.id,
        slug=slug,
        integration_id=integration_id,
        queue_id=queue.id,
        connection_version_id=connection["version_id"],
        components=components,
        workflow_version_id=workflow_version_id,
        platform=platform,
    )


def make_report(team: Team, *, target: str | None = None, external_id: str | None = None) -> Report:
    """An open report about one post, through the platform's intake (API)."""
    from app.services.cases.reports import intake_report

    n = next(_serial)
    result = intake_report(
        {
            "external_id": external_id or f"report-{n}",
            "targets": [{"reference": target or f"post:{n}", "kind": "post"}],
        },
        team.integration_id,
    )
    db.session.rollback()
    return db.session.get(Report, result.report_id)


def make_decision(report: Report, *, code: str = "remove_content", maker: str = "moderator"):
    """A moderator's decision on `report` (it starts the workflows it triggers)."""
    from app.models import Decision
    from app.services.cases.reports import record_decision

    result = record_decision(
        report.id, decision_code=code, rationale="test", operator=make_operator(report.installation_id, maker)
    )
    db.session.rollback()
    return db.session.get(Decision, result.decision_id)


PROPOSAL_STATES = (
    "approval_required",
    "rejected",
    "queued",
    "applying",
    "accepted",  # queued, accepted by the platform, waiting for its confirmation
    "applied",
    "failed",
    "cancelled",
    "compensation_required",
)


def make_proposal(
    team: Team | None = None,
    *,
    state: str = "approval_required",
    report: Report | None = None,
    maker: str = "moderator",
    checker: str = "reviewer",
    attempts: int = 1,
    terminal: bool = True,
) -> ActionProposal:
    """A takedown proposal brought to `state` by the real moves.

    Args:
        team: its installation (a new one without a platform when None).
        state: one of `PROPOSAL_STATES`. Delivered states need ``make_team(platform)``
            with the demo platform: ``applied`` and ``compensation_required`` are
            delivered by the delivery job; ``accepted`` is answered asynchronously;
            ``failed`` fails `attempts` times (see `_fail`: terminal unless
            ``terminal=False``; 8 attempts exhaust the cycle); ``cancelled`` times out
            before approval (WAIT-2).
        report: the report to decide (a new one when None).
        maker: who decides the report; checker: who approves or rejects.
        attempts, terminal: for ``failed`` only.

    The state reached is checked, so a builder that drifted fails where it is used.
    """
    from datetime import timedelta

    from app.domain.clock import utcnow
    from app.domain.states import LEASE_SECONDS
    from app.services.lifecycle.dispatch import deliver, take_lease

    assert state in PROPOSAL_STATES, state
    team = team or make_team()
    report = report or make_report(team)
    make_decision(report, maker=maker)
    proposal = proposal_of(report.id)
    assert proposal is not None, "the enforcement workflow proposed nothing"
    if state == "approval_required":
        return _checked(proposal, "approval_required")
    if state == "rejected":
        approve(team, proposal, reviewer=checker, decision="rejected")
        return _checked(proposal, "rejected")
    if state == "cancelled":
        _expire_wait(proposal)
        return _checked(proposal, "cancelled")
    if proposal.approval_mode == "human":
        approve(team, proposal, reviewer=checker)
    if state == "queued":
        return _checked(proposal, "queued")
    if state == "applying":
        now = utcnow()
        assert take_lease(proposal.id, now, now + timedelta(seconds=LEASE_SECONDS))
        return _checked(proposal, "applying")
    platform = team.demo_platform
    if state == "accepted":
        before = {"mode": platform.state.mode, "console_url": platform.state.console_url}
        platform.state.configure(mode="async", console_url=None)  # accepted, never confirmed
        try:
            deliver(proposal.id)
        finally:
            platform.state.configure(**before)
        row = _checked(proposal, "queued")
        assert row.accepted_at is not None
        return row
    if state == "failed":
        return _fail(proposal, platform, attempts, terminal)
    deliver(proposal.id)
    applied = _checked(proposal, "applied")
    if state == "applied":
        return applied
    from app.services.lifecycle.compensation import propose_compensation

    propose_compensation(
        proposal.id,
        component_version_id=team.components["restore"],
        action_code="restore",
        target=applied.target,
        payload={"reason_code": "compensation", "report_reference": applied.payload["report_reference"]},
        idempotency_key=f"compensate-{proposal.id[-12:]}",
        operator=team.user(checker),
    )
    return _checked(proposal, "compensation_required")


def _fail(proposal, platform: Platform, attempts: int, terminal: bool) -> ActionProposal:
    """Deliver `attempts` times against a platform that fails each one (503, retryable;
    the last 400, terminal, when `terminal` and attempts are left); it works after."""
    from app.domain.states import MAX_ATTEMPTS_PER_CYCLE
    from app.services.lifecycle.dispatch import deliver

    assert 1 <= attempts <= MAX_ATTEMPTS_PER_CYCLE
    for n in range(1, attempts + 1):
        last_refuses = terminal and n == attempts < MAX_ATTEMPTS_PER_CYCLE
        platform.state.configure(fail_next=1, fail_status=400 if last_refuses else 503)
        if n > 1:
            make_due(proposal)
        deliver(proposal.id)
    pass_connection_waits()  # time passes: the breaker those failures opened may probe again (CONN-1)
    row = _checked(proposal, "failed")
    assert (row.delivery_attempt_count, row.delivery_terminal) == (
        attempts,
        terminal or attempts == MAX_ATTEMPTS_PER_CYCLE,
    )
    return row


def _expire_wait(proposal) -> None:
    """Time passes beyond the run's wait deadline; the timeout sweep runs (WAIT-2)."""
    from datetime import timedelta

    from app.domain.clock import utcnow
    from app.models import WorkflowRun
    from app.services.lifecycle import sweeps

    set_row(WorkflowRun, proposal.run_id, wait_deadline_at=utcnow() - timedelta(seconds=1))
    assert sweeps.time_out_runs(utcnow()) == 1


def _checked(proposal, state: str) -> ActionProposal:
    row = reload(proposal)
    assert row.state == state, f"the builder reached {row.state}, not {state} ({row.last_error_code})"
    return row


def approve_change(world: World, pending, approver: str = "admin2") -> dict:
    """A second admin approves a stored configuration change (FOUR-2), bound to its digest."""
    from app.services.admin.changes import PendingChange
    from app.services.admin.reviews import approve_change as approve

    assert isinstance(pending, PendingChange), f"expected a pending change, got {pending!r}"
    return approve(world.user(approver), pending.change_id, pending.digest)


def pending_changes() -> list:
    """Every configuration change still waiting for a second admin, oldest first."""
    from app.models import ConfigChange

    db.session.rollback()
    return list(
        db.session.scalars(
            select(ConfigChange).where(ConfigChange.state == "pending").order_by(ConfigChange.created_at)
        )
    )


def approve_in_console(app, change_id: str, email: str = "admin2@example.com"):
    """A second admin opens the change page, copies its digest and approves it; the answer."""
    import re

    browser = app.test_client()
    with app.app_context():
        token = login(browser, email)
        page = browser.get(f"/admin/changes/{change_id}").get_data(as_text=True)
        digest = re.search(r'id="change-digest">(sha256:[0-9a-f]{64})<', page).group(1)
        return browser.post(f"/admin/changes/{change_id}/approve", data={"csrf_token": token, "digest": digest})


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


def approve_pending(app, email: str = "admin2@example.com") -> list[str]:
    """A second admin approves in the console every configuration change waiting, oldest
    first (FOUR-4: every configuration write waits for one); their ids."""
    ids = [change.id for change in pending_changes()]
    for change_id in ids:
        response = approve_in_console(app, change_id, email)
        shown_once = response.status_code == 200 and "only time this link is shown" in response.get_data(as_text=True)
        assert response.status_code == 303 or shown_once, response.get_data(as_text=True)[-2000:]
    db.session.rollback()
    return ids


def reversal_of(original) -> ActionProposal | None:
    """The scheduled reversal the system made for a temporary action (TEMP-2), fresh from
    the database."""
    db.session.rollback()
    return db.session.scalar(
        select(ActionProposal).where(
            ActionProposal.reverses_proposal_id == original.id, ActionProposal.created_by_type == "system"
        )
    )


def time_reaches(proposal) -> None:
    """Time travel: the scheduled proposal's not_before (and its due time) is now past."""
    from datetime import timedelta

    from app.domain.clock import utcnow

    past = utcnow() - timedelta(seconds=1)
    set_row(ActionProposal, proposal.id, not_before=past, next_attempt_at=past)


def appeal_through_api(client, world: World, external_id: str = "demo-report-1", statement: str = "satire") -> str:
    """The platform files an appeal on a report through the API; returns its id."""
    return client.post(
        "/api/v1/appeals",
        headers={"Authorization": f"Bearer {world.console_token}"},
        json={"report_external_id": external_id, "statement": statement},
    ).get_json()["appeal_id"]


def at_once(app, calls) -> list:
    """Run each call in its own thread and app context, released together; returns
    each call's result or the exception it raised."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, call):
        with app.app_context():
            barrier.wait(10)
            try:
                results[index] = call()
            except Exception as error:  # noqa: BLE001 - the test inspects what was raised
                results[index] = error
            finally:
                db.session.remove()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def set_approval_settings(installation_id: str, settings: dict) -> None:
    """Put approval settings in force as if a second admin had approved them (POL-3);
    `settings` is `approval_policy.settings_to_json`'s document."""
    from app.domain.approval_policy import settings_problems
    from app.models import ApprovalSettingsVersion
    from app.models.changes import add_settings_version

    assert not settings_problems(settings), settings_problems(settings)
    with unit_of_work() as uow:
        add_settings_version(uow.session, ApprovalSettingsVersion, installation_id, settings)
        uow.commit()
    db.session.expire_all()


def set_operator_attributes(operator_id: str, *, team: str | None = None, attributes: dict | None = None) -> None:
    """Give an operator a team and attributes as if a second admin had approved it (POL-1)."""
    set_row(OperatorUser, operator_id, team=team, attributes=attributes or {})


PEER_AND_LEAD = {
    "policies": [
        {
            "key": "peer_and_lead",
            "label": "A peer and a lead",
            "ttl_seconds": 3600,
            "factors": [
                {"key": "peer", "label": "peer", "count": 1, "roles": ["reviewer"]},
                {"key": "lead", "label": "lead", "count": 1, "roles": ["reviewer"], "attributes": {"level": "lead"}},
            ],
        }
    ],
    "routes": [{"policies": ["peer_and_lead"]}],
}


def set_dsa_settings(installation_id: str, settings: dict | None = None) -> None:
    """Put DSA settings in force as if a second admin had approved them (DSA-1); by
    default the demo's (`app.demo_dsa.DEMO_DSA_SETTINGS`: DSA on)."""
    from app.demo_dsa import DEMO_DSA_SETTINGS
    from app.domain.dsa_settings import settings_problems
    from app.models import DsaSettingsVersion
    from app.models.changes import add_settings_version

    settings = DEMO_DSA_SETTINGS if settings is None else settings
    assert not settings_problems(settings), settings_problems(settings)
    with unit_of_work() as uow:
        add_settings_version(uow.session, DsaSettingsVersion, installation_id, settings)
        uow.commit()
    db.session.expire_all()
