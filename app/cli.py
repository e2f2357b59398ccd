"""Flask CLI commands for operators (``flask --app app <command>``)."""

from __future__ import annotations

import os
import sys

import click
from flask import Flask
from sqlalchemy import select


def register_cli(app: Flask) -> None:
    @app.cli.command("demo")
    @click.option("--port", default=lambda: int(os.environ.get("DEMO_PORT", "5000")), show_default="5000")
    @click.option(
        "--platform-port", default=lambda: int(os.environ.get("DEMO_PLATFORM_PORT", "5050")), show_default="5050"
    )
    def demo(port: int, platform_port: int) -> None:
        """Migrate, seed a demo installation, run console + worker + demo platform."""
        from .demo import run_demo

        run_demo(app, port, platform_port)

    @app.cli.command("create-admin")
    @click.option("--email", required=True)
    @click.option("--name", "display_name", required=True)
    @click.option("--installation", "installation_slug", default="default", show_default=True)
    @click.password_option()
    def create_admin(email: str, display_name: str, installation_slug: str, password: str) -> None:
        """Create the first administrator (and the installation if it is new)."""
        from .domain.errors import ApiError
        from .extensions import db
        from .models import Installation
        from .services.admin.operators import create_operator
        from .services.uow import Actor, unit_of_work

        installation = db.session.scalar(select(Installation).where(Installation.slug == installation_slug))
        if installation is None:
            with unit_of_work() as uow:
                installation = Installation(name=installation_slug, slug=installation_slug)
                uow.session.add(installation)
                uow.commit()
        try:
            operator = create_operator(
                installation.id,
                email=email,
                password=password,
                display_name=display_name,
                roles=["admin", "reviewer"],
                actor=Actor.system("cli"),
            )
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"created {operator.email} ({operator.id})")

    @app.cli.command("create-integration-token")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--integration", "integration_slug", required=True)
    @click.option("--label", default="", help="what the token is for, e.g. 'prod platform 2026-12'")
    def create_integration_token(installation_slug: str, integration_slug: str, label: str) -> None:
        """Issue a bearer token for a platform; it is printed once and only its hash is kept."""
        from .extensions import db
        from .models import Installation, Integration
        from .services.admin.integrations import issue_token
        from .services.uow import Actor

        integration = db.session.scalar(
            select(Integration)
            .join(Installation, Installation.id == Integration.installation_id)
            .where(Installation.slug == installation_slug, Integration.slug == integration_slug)
        )
        if integration is None:
            click.echo("integration_not_found: no such installation/integration slug", err=True)
            sys.exit(1)
        from .domain.errors import ApiError

        try:
            issued = issue_token(integration.id, label=label, actor=Actor.system("cli"))
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"token id: {issued.token_id}")
        click.echo(f"token:    {issued.token}")
        click.echo("Store it in the platform now: it is not shown again.")

    @app.cli.command("revoke-integration-token")
    @click.argument("token_id")
    def revoke_integration_token(token_id: str) -> None:
        """Revoke a token by id (requests with it are refused from now on)."""
        from .domain.errors import ApiError
        from .extensions import db
        from .models import IntegrationToken
        from .services.admin.integrations import revoke_token
        from .services.uow import Actor

        row = db.session.get(IntegrationToken, token_id)
        try:
            if row is None:
                raise ApiError(404, "token_not_found", "No such token.")
            revoke_token(token_id, installation_id=row.installation_id, actor=Actor.system("cli"))
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"revoked {token_id}")

    @app.cli.command("proposal-history")
    @click.argument("proposal_id")
    def proposal_history(proposal_id: str) -> None:
        """Show a proposal's state, attempts, receipts and audit trail."""
        from .extensions import db
        from .models import ActionProposal, ActionReceiptRecord, AuditEvent, ConnectionAttempt

        proposal = db.session.get(ActionProposal, proposal_id)
        if proposal is None:
            click.echo("action_not_found: no such proposal", err=True)
            sys.exit(1)
        click.echo(f"{proposal.id}\n  {proposal.action_code} {proposal.target_json}")
        click.echo(
            f"  state {proposal.state} (terminal {proposal.delivery_terminal}), cycle {proposal.delivery_cycle}, "
            f"attempts {proposal.delivery_attempt_count}, last error {proposal.last_error_code or '-'}"
        )
        click.echo(f"  operation {proposal.operation_id}\n  digest {proposal.payload_digest}")
        click.echo("attempts:")
        for a in db.session.scalars(
            select(ConnectionAttempt)
            .where(ConnectionAttempt.proposal_id == proposal.id)
            .order_by(ConnectionAttempt.attempt_number)
        ):
            click.echo(
                f"  #{a.attempt_number} cycle {a.delivery_cycle} {a.started_at:%Y-%m-%d %H:%M:%S} "
                f"{a.response_status or '-'} {a.response_class or 'in flight'} {a.error_code or ''} "
                f"{a.duration_ms if a.duration_ms is not None else '-'} ms"
            )
        click.echo("receipts:")
        for r in db.session.scalars(
            select(ActionReceiptRecord)
            .where(ActionReceiptRecord.proposal_id == proposal.id)
            .order_by(ActionReceiptRecord.received_at)
        ):
            click.echo(f"  {r.received_at:%Y-%m-%d %H:%M:%S} cycle {r.delivery_cycle} {r.source} {r.status}")
        click.echo("audit:")
        for e in db.session.scalars(
            select(AuditEvent).where(AuditEvent.target_id == proposal.id).order_by(AuditEvent.seq)
        ):
            click.echo(f"  #{e.seq} {e.created_at:%Y-%m-%d %H:%M:%S} {e.action} by {e.actor_type}:{e.actor_id}")

    @app.cli.command("sweep")
    def sweep() -> None:
        """Run the periodic sweeps once, now."""
        from dataclasses import asdict

        from .services.lifecycle.sweeps import run_sweeps

        click.echo(asdict(run_sweeps()))

    @app.cli.command("verify-audit")
    def verify_audit() -> None:
        """Verify every installation's audit hash chain; exit 1 at the first break."""
        from .extensions import db
        from .models import Installation
        from .services.audit import verify_chain

        broken = False
        for installation in db.session.scalars(select(Installation).order_by(Installation.slug)):
            report = verify_chain(installation.id)
            if report.ok:
                click.echo(f"{installation.slug}: ok ({report.rows_checked} rows)")
            else:
                broken = True
                click.echo(f"{installation.slug}: BROKEN at seq {report.first_broken_seq}: {report.reason}")
        sys.exit(1 if broken else 0)

    @app.cli.command("config-changes")
    def config_changes() -> None:
        """List the configuration changes waiting for a second admin (SPEC FOUR-2)."""
        from .extensions import db
        from .models import ConfigChange, Installation

        rows = db.session.execute(
            select(ConfigChange, Installation.slug)
            .join(Installation, Installation.id == ConfigChange.installation_id)
            .where(ConfigChange.state == "pending")
            .order_by(ConfigChange.created_at)
        ).all()
        for change, slug in rows:
            click.echo(f"{change.id}  {slug}  {change.kind}  {change.summary}")
            click.echo(
                f"  digest {change.digest}, proposed by {change.proposed_by} at {change.created_at:%Y-%m-%d %H:%M:%S}"
            )
        if not rows:
            click.echo("nothing waits for a second admin")

    @app.cli.command("config-break-glass")
    @click.argument("change_id")
    @click.option("--reason", required=True, help="why no second admin can approve it (at least 10 characters)")
    @click.option("--digest", default=None, help="the change's digest (sha256:…), to apply only that exact change")
    def config_break_glass(change_id: str, reason: str, digest: str | None) -> None:
        """Apply a pending configuration change without a second admin (SPEC FOUR-2).

        The only way round four-eyes for configuration: it needs a reason and writes a
        ``config.break_glass`` audit row naming the change, its digest and the reason.
        """
        from .domain.errors import ApiError
        from .services.admin.reviews import break_glass

        try:
            change = break_glass(change_id, reason, digest=digest)
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"applied {change.id} ({change.kind}: {change.summary})")
        click.echo(f"  digest {change.digest}; recorded as config.break_glass with your reason")
