"""The operators' commands (app/cli.py), run through Flask's CLI runner."""

from __future__ import annotations

import json
import os
import pwd
import socket

from sqlalchemy import func, select

from app.extensions import db
from app.models import AuditEvent, Installation, IntegrationToken, OperatorUser
from app.queueing import delivery_queue, get_redis
from app.services.admin.integrations import authenticate

from .builders import make_proposal, make_team

PASSWORD = "a-long-password-1"


def count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


REASON = "Onboarding Grace, ticket ONB-4711"


def create_admin(runner, email="ada@example.org", installation="trust-safety", password=PASSWORD, extra=()):
    args = ["create-admin", "--email", email, "--name", "Ada", "--installation", installation]
    return runner.invoke(args=[*args, "--password", password, *extra])


def who() -> dict[str, str]:
    return {"os_user": pwd.getpwuid(os.getuid()).pw_name, "host": socket.gethostname()}


def test_four10_the_os_user_recorded_is_the_process_owner_not_a_claimed_login_name(app, runner):
    """FOUR-10 (break-it pass): ``LOGNAME=ceo-alice flask ...`` does not make the audit row
    say ceo-alice: the OS user comes from the process's user id."""
    result = runner.invoke(
        args=["create-admin", "--email", "ada@example.org", "--name", "Ada", "--installation", "trust-safety",
              "--password", PASSWORD],
        env={"LOGNAME": "ceo-alice", "USER": "ceo-alice", "LNAME": "ceo-alice", "USERNAME": "ceo-alice"},
    )
    assert result.exit_code == 0, result.output
    db.session.rollback()
    created = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "operator.created"))
    assert json.loads(created.details_json)["os_user"] == pwd.getpwuid(os.getuid()).pw_name != "ceo-alice"


def test_create_admin_makes_the_installation_and_an_admin_who_is_not_a_reviewer(app, runner):
    """FOUR-6: the bootstrap admin is an admin only; FOUR-10: the OS user and host are recorded."""
    result = create_admin(runner)
    assert result.exit_code == 0, result.output
    db.session.rollback()
    operator = db.session.scalar(select(OperatorUser).where(OperatorUser.email == "ada@example.org"))
    assert result.output.splitlines()[0] == f"created ada@example.org ({operator.id}) with roles: admin"
    assert f"OS user {who()['os_user']} on host {who()['host']}" in result.output
    assert operator.roles == {"admin"} and operator.check_password(PASSWORD)
    installation = db.session.get(Installation, operator.installation_id)
    assert installation.slug == "trust-safety"
    created = db.session.scalar(select(AuditEvent).where(AuditEvent.action == "operator.created"))
    assert (created.actor_type, created.actor_id, created.target_id) == ("system", "cli", operator.id)
    details = json.loads(created.details_json)
    assert {key: details[key] for key in ("os_user", "host")} == who() and details["reason"] is None


def test_create_admin_grants_more_roles_only_when_asked(app, runner):
    """FOUR-6: --roles asks for more than admin; bad roles are refused."""
    result = create_admin(runner, extra=["--roles", "admin,reviewer"])
    assert result.exit_code == 0, result.output
    db.session.rollback()
    assert db.session.scalar(select(OperatorUser.roles_text)) == "admin,reviewer"
    bad = create_admin(runner, email="bob@example.org", extra=["--roles", "root", "--reason", REASON])
    assert bad.exit_code == 1 and bad.output.startswith("roles_invalid: ")


def test_create_admin_needs_a_reason_of_substance_once_an_admin_exists(app, runner):
    """FOUR-10: a second admin from the shell needs a reason of substance, recorded with the OS user and host."""
    assert create_admin(runner).exit_code == 0
    for extra in ([], ["--reason", "\u200b" * 10], ["--reason", "\u200b" * 30 + " x y"], ["--reason", "because"]):
        refused = create_admin(runner, email="grace@example.org", extra=extra)
        assert refused.exit_code == 1 and refused.output.startswith("create_admin_reason_invalid: "), refused.output
    assert count(OperatorUser) == 1
    joined = create_admin(runner, email="grace@example.org", extra=["--reason", REASON])
    assert joined.exit_code == 0, joined.output
    assert count(Installation) == 1 and count(OperatorUser) == 2
    db.session.rollback()
    [_, event] = db.session.scalars(
        select(AuditEvent).where(AuditEvent.action == "operator.created").order_by(AuditEvent.seq)
    ).all()
    assert json.loads(event.details_json) | who() == json.loads(event.details_json)
    assert json.loads(event.details_json)["reason"] == REASON
    assert REASON in joined.output and who()["host"] in joined.output


def test_create_admin_refuses_a_lookalike_email(app, runner):
    """FOUR-10: a Cyrillic а in an e-mail is refused from the shell too."""
    refused = create_admin(runner, email="\u0430da@example.org")
    assert refused.exit_code == 1 and refused.output.startswith("operator_email_not_ascii: ")
    assert count(OperatorUser) == 0


def test_create_admin_refuses_a_taken_email_or_a_short_password(app, runner):
    """A refusal names its code, exits 1 and creates nobody."""
    assert create_admin(runner).exit_code == 0
    taken = create_admin(runner, extra=["--reason", REASON])
    assert taken.exit_code == 1 and taken.output.startswith("email_taken: ")
    short = create_admin(runner, email="bob@example.org", password="short", extra=["--reason", REASON])
    assert short.exit_code == 1 and short.output.startswith("password_invalid: ")
    assert count(OperatorUser) == 1


def test_four4_a_cli_token_is_a_pending_change_usable_only_once_approved(app, runner):
    """FOUR-4: create-integration-token proposes the token as an admin of the
    installation; it is printed once, authenticates nothing until a second admin
    approves the change, and the CLI revokes it alone (revoking only takes a voice away)."""
    from app.models import ConfigChange
    from app.services.admin.reviews import approve_change

    team = make_team()
    args = ["create-integration-token", "--installation", team.slug, "--integration", "platform"]
    proposer = ["--proposer", f"admin@{team.slug}.example.com"]
    issued = runner.invoke(args=[*args, *proposer, "--label", "prod 2026-12"])
    assert issued.exit_code == 0, issued.output
    lines = dict(line.split(":", 1) for line in issued.output.splitlines()[:2])
    change_id, token = lines["change"].split()[0], lines["token"].strip()
    assert "not shown again" in issued.output and "second admin" in issued.output
    assert count(IntegrationToken) == 0 and authenticate(token) is None  # not usable before approval
    change = db.session.get(ConfigChange, change_id)
    assert change.kind == "integration.token" and token not in str(change.content) and not change.secrets

    result = approve_change(team.user("admin2"), change.id, change.digest)
    row = db.session.get(IntegrationToken, result["token_id"])
    assert (row.label, row.token_hash != token) == ("prod 2026-12", True)  # only the hash is kept
    assert authenticate(token).id == team.integration_id

    revoked = runner.invoke(args=["revoke-integration-token", row.id])
    assert (revoked.exit_code, revoked.output.strip()) == (0, f"revoked {row.id}")
    db.session.rollback()
    assert authenticate(token) is None
    assert db.session.scalar(select(AuditEvent.actor_id).where(AuditEvent.action == "integration.token_revoked")) == "cli"


def test_token_commands_refuse_unknown_names(app, runner):
    team = make_team()
    base = ["create-integration-token", "--installation", team.slug, "--proposer", f"admin@{team.slug}.example.com"]
    unknown = runner.invoke(args=[*base, "--integration", "nope"])
    assert unknown.exit_code == 1 and unknown.output.startswith("integration_not_found: ")
    for proposer in (f"moderator@{team.slug}.example.com", "nobody@example.com"):
        args = ["create-integration-token", "--installation", team.slug, "--integration", "platform"]
        refused = runner.invoke(args=[*args, "--proposer", proposer])
        assert refused.exit_code == 1 and refused.output.startswith("proposer_not_found: "), refused.output
    missing = runner.invoke(args=["revoke-integration-token", "tok_missing"])
    assert missing.exit_code == 1 and missing.output.startswith("token_not_found: ")
    assert count(IntegrationToken) == 0


def test_proposal_history_shows_state_attempts_receipts_and_audit(app, runner, platform):
    team = make_team(platform)
    proposal = make_proposal(team, state="applied")
    result = runner.invoke(args=["proposal-history", proposal.id])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == proposal.id
    assert lines[2] == "  state applied (terminal True), cycle 1, attempts 1, last error -"
    assert lines[3:5] == [f"  operation {proposal.operation_id}", f"  digest {proposal.payload_digest}"]
    # FOUR-5: the delivery its approval bound, in words
    assert lines[5].startswith("  delivery Sends POST http://127.0.0.1:")
    assert "/actions/takedown · webhook · " in lines[5]
    attempts = lines.index("attempts:")
    receipts = lines.index("receipts:")
    audit = lines.index("audit:")
    assert receipts - attempts == 2 and " 200 success " in lines[attempts + 1]
    assert lines[attempts + 1].startswith("  #1 cycle 1 ")
    assert audit - receipts == 2 and lines[receipts + 1].endswith(" cycle 1 sync applied")
    trail = [line.split(maxsplit=3)[3] for line in lines[audit + 1 :]]
    assert trail == [
        f"action.proposed by system:{proposal.run_id}",
        f"action.approved by operator:{team.user('reviewer').id}",
        f"workflow.action_applied by system:{proposal.run_id}",
    ]


def test_proposal_history_of_an_unknown_proposal(app, runner):
    result = runner.invoke(args=["proposal-history", "missing:proposal"])
    assert (result.exit_code, result.output.strip()) == (1, "action_not_found: no such proposal")


def test_sweep_runs_the_sweeps_now(app, runner):
    """EVT-3: a due delivery whose job Redis lost is enqueued again."""
    make_proposal(make_team(), state="queued")
    get_redis(app).flushdb()
    result = runner.invoke(args=["sweep"])
    assert result.exit_code == 0, result.output
    assert "'deliveries_enqueued': 1" in result.output
    assert delivery_queue(app).count == 1


def test_verify_audit_says_ok_for_every_installation(app, runner):
    """AUD-2: an intact chain exits 0 with the rows it checked."""
    first, second = make_team(), make_team()
    make_proposal(first)
    result = runner.invoke(args=["verify-audit"])
    assert result.exit_code == 0, result.output
    db.session.rollback()
    rows = {
        team.slug: db.session.scalar(
            select(func.count()).select_from(AuditEvent).where(AuditEvent.installation_id == team.installation_id)
        )
        for team in (first, second)
    }
    lines = [line for line in result.output.splitlines() if not line.startswith("warning: no checkpoints")]
    assert lines == [f"{slug}: ok ({rows[slug]} rows; 0 checkpoints agree)" for slug in sorted(rows)]


def test_demo_ports_are_integers_checked_before_anything_starts(app, runner, monkeypatch):
    """docs/tour.md's `--port 5600 --platform-port 5650`: a port that is not a number is a usage
    error naming the option (exit 2), before migrating, seeding or starting anything —
    not a traceback from the web server after all of that."""
    from app import demo

    started = []
    monkeypatch.setattr(demo, "run_demo", lambda *args: started.append(args))
    for option in ("--port", "--platform-port"):
        result = runner.invoke(args=["demo", option, "abc"])
        assert result.exit_code == 2 and "is not a valid integer" in result.output and option in result.output
    assert runner.invoke(args=["demo", "--port", "5600", "--platform-port", "5650"]).exit_code == 0
    assert [args[1:] for args in started] == [(5600, 5650, "demo")]


def test_four8_a_cli_token_succeeds_a_token_of_its_integration(app, runner):
    """FOUR-8: ``create-integration-token --succeeds <token id>`` names the token a
    rotation replaces; approved, the new token stands since the old one's standing.
    A token of another integration, or an unknown id: exit 1
    ``token_succeeds_invalid``, no change stored."""
    from app.models import ConfigChange, Integration
    from app.services.admin.integrations import create_integration
    from app.services.admin.reviews import approve_change

    team = make_team()
    args = ["create-integration-token", "--installation", team.slug, "--integration", "platform"]
    proposer = ["--proposer", f"admin@{team.slug}.example.com"]

    def approve(output: str) -> IntegrationToken:
        change_id = dict(line.split(":", 1) for line in output.splitlines()[:2])["change"].split()[0]
        change = db.session.get(ConfigChange, change_id)
        result = approve_change(team.user("admin2"), change.id, change.digest)
        return db.session.get(IntegrationToken, result["token_id"])

    first = runner.invoke(args=[*args, *proposer, "--label", "first"])
    old = approve(first.output)
    rotated = runner.invoke(args=[*args, *proposer, "--label", "second", "--succeeds", old.id])
    assert rotated.exit_code == 0, rotated.output
    assert f"succeeds: {old.id}" in rotated.output
    new = approve(rotated.output)
    assert (new.standing_since, new.created_at > old.created_at) == (old.standing_since, True)

    other_id = create_integration(team.user("admin"), name="Other", slug="other", default_queue_id=None)
    other_args = ["create-integration-token", "--installation", team.slug, "--integration", "other"]
    theirs = approve(runner.invoke(args=[*other_args, *proposer]).output)
    assert db.session.get(Integration, other_id).id == theirs.integration_id
    changes = count(ConfigChange)
    for wrong in (theirs.id, "tok_missing"):
        refused = runner.invoke(args=[*args, *proposer, "--succeeds", wrong])
        assert refused.exit_code == 1 and refused.output.startswith("token_succeeds_invalid: "), refused.output
    assert count(ConfigChange) == changes
