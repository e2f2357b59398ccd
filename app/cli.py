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
        from .services.operators import create_operator
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

    @app.cli.command("sweep")
    def sweep() -> None:
        """Run the periodic sweeps once, now."""
        from dataclasses import asdict

        from .services.sweeps import run_sweeps

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
