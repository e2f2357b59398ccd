"""Flask CLI commands for operators (``flask --app app <command>``)."""

from __future__ import annotations

import os
import sys

import click
from flask import Flask
from sqlalchemy import select


def _invoked_by() -> dict[str, str]:
    """Who runs a command that acts without a second person: OS user and host (FOUR-10).

    The user is the process owner's name from its user id, not ``LOGNAME``/``USER``,
    which whoever runs the command may set to anything."""
    import pwd
    import socket

    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a user id with no entry in the password database
        user = f"uid {os.getuid()}"
    return {"os_user": user, "host": socket.gethostname()}


def register_cli(app: Flask) -> None:
    @app.cli.command("demo")
    @click.option("--port", type=int, default=lambda: int(os.environ.get("DEMO_PORT", "5000")), show_default="5000")
    @click.option(
        "--platform-port",
        type=int,
        default=lambda: int(os.environ.get("DEMO_PLATFORM_PORT", "5050")),
        show_default="5050",
    )
    @click.option(
        "--platform",
        type=click.Choice(["demo", "atproto"]),
        default="demo",
        show_default=True,
        help="atproto also starts a real AT Protocol PDS on loopback and an installation acting on it.",
    )
    def demo(port: int, platform_port: int, platform: str) -> None:
        """Migrate, seed a demo installation, run console + worker + demo platform."""
        from .demo import run_demo

        run_demo(app, port, platform_port, platform)

    @app.cli.command("create-admin")
    @click.option("--email", required=True)
    @click.option("--name", "display_name", required=True)
    @click.option("--installation", "installation_slug", default="default", show_default=True)
    @click.option("--roles", default="admin", show_default=True, help="comma-separated: admin,reviewer,...")
    @click.option(
        "--reason",
        default=None,
        help="why, when the installation has an admin already (12+ visible characters, 2+ words)",
    )
    @click.password_option()
    def create_admin(
        email: str, display_name: str, installation_slug: str, roles: str, reason: str | None, password: str
    ) -> None:
        """Create an administrator (and the installation if it is new), as the system.

        An admin is not a reviewer unless ``--roles`` asks for it (FOUR-6). Once the
        installation has an admin (active or not), a reason of substance is needed
        (FOUR-10): admins then add people by invitation in the console, and this
        command is a way round them. The first admin of an installation needs none:
        there is nobody else to ask or to bypass, and the audit row still names the OS
        user and host. Both are printed too.
        """
        from .domain.errors import ApiError
        from .domain.reasons import reason_problem
        from .extensions import db
        from .models import Installation, OperatorUser
        from .services.admin.operators import create_operator
        from .services.uow import Actor, unit_of_work

        invoked_by = _invoked_by()
        installation = db.session.scalar(select(Installation).where(Installation.slug == installation_slug))
        has_admin = installation is not None and any(
            operator.has_role("admin")
            for operator in db.session.scalars(
                select(OperatorUser).where(OperatorUser.installation_id == installation.id)
            )
        )
        problem = reason_problem(reason) if has_admin or reason is not None else None
        if problem:
            click.echo(f"create_admin_reason_invalid: {installation_slug} has an admin already. {problem}", err=True)
            sys.exit(1)
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
                roles=[role.strip() for role in roles.split(",") if role.strip()],
                actor=Actor.system("cli"),
                details={"reason": reason.strip() if reason else None, **invoked_by},
            )
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"created {operator.email} ({operator.id}) with roles: {', '.join(sorted(operator.roles))}")
        click.echo(f"recorded as the system, run by OS user {invoked_by['os_user']} on host {invoked_by['host']}")
        if reason:
            click.echo(f"reason: {reason.strip()}")

    @app.cli.command("create-integration-token")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--integration", "integration_slug", required=True)
    @click.option("--proposer", "proposer_email", required=True, help="e-mail of the admin proposing the token")
    @click.option("--label", default="", help="what the token is for, e.g. 'prod platform 2026-12'")
    @click.option(
        "--succeeds",
        "succeeds",
        multiple=True,
        help="id of a token of the same integration this one replaces (repeatable; FOUR-8: the new token"
        " may then confirm actions already sent under it)",
    )
    def create_integration_token(
        installation_slug: str, integration_slug: str, proposer_email: str, label: str, succeeds: tuple[str, ...]
    ) -> None:
        """Propose a bearer token for a platform (SPEC FOUR-4): printed once, only its hash
        is kept, and it authenticates nothing until a second admin approves the change.
        ``--succeeds`` names the tokens a rotation replaces (FOUR-8)."""
        from .domain.errors import ApiError
        from .extensions import db
        from .models import Installation, Integration
        from .services.admin.token_changes import cli_proposer, propose_token

        integration = db.session.scalar(
            select(Integration)
            .join(Installation, Installation.id == Integration.installation_id)
            .where(Installation.slug == installation_slug, Integration.slug == integration_slug)
        )
        if integration is None:
            click.echo("integration_not_found: no such installation/integration slug", err=True)
            sys.exit(1)
        try:
            proposer = cli_proposer(installation_slug, proposer_email)
            pending = propose_token(proposer, integration.id, label, list(succeeds))
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"change:   {pending.change_id} (digest {pending.digest})")
        click.echo(f"token:    {pending.shown_once['token']}")
        if succeeds:
            click.echo(f"succeeds: {', '.join(succeeds)}")
        click.echo("It is not shown again, and it authenticates nothing until a second admin approves the change")
        click.echo("at /admin/changes (or config-break-glass with a reason).")

    @app.cli.command("bulk-cap")
    @click.argument("role")
    @click.argument("max_items")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--proposer", "proposer_email", required=True, help="e-mail of the admin proposing the cap")
    def bulk_cap(role: str, max_items: str, installation_slug: str, proposer_email: str) -> None:
        """Propose the items per bulk batch for ROLE = MAX_ITEMS (SPEC BULK-5): it applies
        only when a second admin approves the change, raising or lowering alike."""
        from .domain.errors import ApiError
        from .services.admin.bulk_caps import propose_cap
        from .services.admin.token_changes import cli_proposer

        try:
            pending = propose_cap(cli_proposer(installation_slug, proposer_email), role=role, max_items=max_items)
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        if pending is None:
            click.echo(f"Nothing to change: the cap for {role} is {max_items} already.")
            return
        click.echo(f"change:   {pending.change_id} (digest {pending.digest})")
        click.echo("It applies when a second admin approves it at /admin/changes.")

    @app.cli.command("approval-settings")
    @click.option("--file", "path", required=True, type=click.Path(dir_okay=False), help="the settings document (JSON)")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--proposer", "proposer_email", required=True, help="e-mail of the admin proposing the settings")
    def approval_settings(path: str, installation_slug: str, proposer_email: str) -> None:
        """Propose the approval policies and routes in the JSON document at PATH (SPEC
        POL-3): they apply only when a second admin approves the change (FOUR-2)."""
        from .services.admin import approval_policies

        _propose_settings_file(approval_policies, "approval", path, installation_slug, proposer_email)

    @app.cli.command("dsa-settings")
    @click.option("--file", "path", required=True, type=click.Path(dir_okay=False), help="the settings document (JSON)")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--proposer", "proposer_email", required=True, help="e-mail of the admin proposing the settings")
    def dsa_settings(path: str, installation_slug: str, proposer_email: str) -> None:
        """Propose the DSA settings in the JSON document at PATH (SPEC DSA-1): they
        apply only when a second admin approves the change (FOUR-2)."""
        from .services.admin import dsa_config

        _propose_settings_file(dsa_config, "DSA", path, installation_slug, proposer_email)

    @app.cli.command("queue-target")
    @click.argument("queue_slug")
    @click.argument("target")
    @click.option("--installation", "installation_slug", required=True)
    @click.option("--admin", "admin_email", required=True, help="e-mail of the admin setting it")
    def queue_target(queue_slug: str, target: str, installation_slug: str, admin_email: str) -> None:
        """Set QUEUE_SLUG's time to decide to TARGET (90m, 4h, 2d; "" for none), SPEC
        QUEUE-4. A target changes no action, so it applies at once (audited)."""
        from .domain.errors import ApiError
        from .domain.time_targets import target_words
        from .services.admin.queue_targets import set_queue_target
        from .services.admin.token_changes import cli_proposer

        try:
            seconds = set_queue_target(cli_proposer(installation_slug, admin_email), queue_slug, target)
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        click.echo(f"Queue {queue_slug}: {target_words(seconds)} to decide.")

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
        from .domain.digests import canonical_json
        from .domain.proposal.destination import in_words
        from .extensions import db
        from .models import ActionProposal, ActionReceiptRecord, AuditEvent, ConnectionAttempt
        from .services.read.console import attempt_statuses

        proposal = db.session.get(ActionProposal, proposal_id)
        if proposal is None:
            click.echo("action_not_found: no such proposal", err=True)
            sys.exit(1)
        click.echo(f"{proposal.id}\n  {proposal.action_code} {canonical_json(proposal.target)}")
        click.echo(
            f"  state {proposal.state} (terminal {proposal.delivery_terminal}), cycle {proposal.delivery_cycle}, "
            f"attempts {proposal.delivery_attempt_count}, last error {proposal.last_error_code or '-'}"
        )
        click.echo(f"  operation {proposal.operation_id}\n  digest {proposal.payload_digest}")
        words = in_words(proposal.delivery)  # FOUR-5: where its approval bound it to go
        click.echo(f"  delivery {words.text if words else '- (prepared before FOUR-5)'}")
        click.echo("attempts:")
        attempts = db.session.scalars(
            select(ConnectionAttempt)
            .where(ConnectionAttempt.proposal_id == proposal.id)
            .order_by(ConnectionAttempt.attempt_number, ConnectionAttempt.started_at)
        ).all()
        statuses = attempt_statuses(proposal, attempts)
        for a in attempts:
            status = statuses[a.id]
            finished = f"finished {a.finished_at:%Y-%m-%d %H:%M:%S}" if a.finished_at else status.replace("_", " ")
            click.echo(
                f"  #{a.attempt_number} cycle {a.delivery_cycle} {a.method} {a.url} "
                + (f"({a.purpose}) " if a.purpose != "update" else "")  # a platform kind's other requests (PLAT-4)
                + f"started {a.started_at:%Y-%m-%d %H:%M:%S} {finished} "
                f"{a.response_status or '-'} {a.response_class or '-'} {a.error_code or ''} "
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

    @app.cli.command("bulk-status")
    @click.argument("batch_id")
    def bulk_status(batch_id: str) -> None:
        """Show a bulk batch, named by its id or its public reference (B-XXXX, of any
        installation): reference, state, action, maker, approver, digest, its undo,
        and its ledger: each bucket, the total and whether it adds up (BULK-6, BULK-9)."""
        from sqlalchemy import or_, select

        from .domain.bulk.batch import LEDGER
        from .extensions import db
        from .models import BulkBatch, OperatorUser
        from .services.bulk.progress import ledger

        found = db.session.scalars(select(BulkBatch).where(
            or_(BulkBatch.id == batch_id, BulkBatch.public_reference == batch_id)).limit(3)).all()
        if len(found) > 1:
            where = ", ".join(f"{b.id} (installation {b.installation_id})" for b in found)
            click.echo(f"bulk_batch_ambiguous: {batch_id!r} names several batches: {where}; give the id", err=True)
            sys.exit(1)
        if not found:
            click.echo(f"bulk_batch_not_found: no bulk batch {batch_id!r}", err=True)
            sys.exit(1)
        batch = found[0]

        def who(operator_id: str | None) -> str:
            operator = db.session.get(OperatorUser, operator_id) if operator_id else None
            return f"{operator.display_name} <{operator.email}>" if operator else "-"

        click.echo(f"{batch.public_reference} {batch.id}\n  state {batch.state} ({batch.kind})")
        click.echo(f"  action {batch.action_code} decision {batch.decision_code}")
        click.echo(f"  maker {who(batch.maker_id)}\n  approver {who(batch.approved_by)}")
        click.echo(f"  digest {batch.batch_digest or '-'}\n  dry run digest {batch.dry_run_digest}")
        if batch.undoes_batch_id:
            original = db.session.get(BulkBatch, batch.undoes_batch_id)
            click.echo(f"  undoes {original.public_reference if original else batch.undoes_batch_id}")
        for undo in db.session.scalars(select(BulkBatch).where(BulkBatch.undoes_batch_id == batch.id)
                                       .order_by(BulkBatch.created_at)):
            standing = undo.state not in ("rejected", "expired", "cancelled")
            click.echo(f"  {'Undone by' if standing else 'undo'} {undo.public_reference} ({undo.state})")
        book = ledger(db.session, batch)
        click.echo("ledger:")
        for name in LEDGER:
            click.echo(f"  {name.value:<12} {book[name]}")
        counted = sum(book[name] for name in LEDGER)
        click.echo(f"  {'total':<12} {book.total}  ({'adds up' if book.adds_up else f'DOES NOT ADD UP: {counted} counted'})")

    @app.cli.command("sweep")
    def sweep() -> None:
        """Run the periodic sweeps once, now."""
        from dataclasses import asdict

        from .services.lifecycle.sweeps import run_sweeps

        click.echo(asdict(run_sweeps()))

    @app.cli.command("erasure-sweep")
    def erasure_sweep() -> None:
        """Erase now the personal data past each installation's retention period (SPEC OPS-4)."""
        from .services.cases.erasure import erase_due_retention

        click.echo(f"erased {erase_due_retention()} rows past their retention period")

    @app.cli.command("verify-audit")
    @click.option(
        "--checkpoints",
        "checkpoint_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="checkpoint JSON lines to check against (repeatable; default: AUDIT_CHECKPOINT_PATH)",
    )
    def verify_audit(checkpoint_files: tuple[str, ...]) -> None:
        """Verify every installation's audit chain under AUDIT_CHAIN_KEY and against the
        checkpoints (REC-3, REC-4); exit 1 on a broken row, a cut tail or rewritten rows."""
        from pathlib import Path

        from .services.audit import checkpoint_path, installation_slugs, read_checkpoints, verify_chain

        files = [Path(name) for name in checkpoint_files]
        if not files and checkpoint_path().exists():
            files = [checkpoint_path()]
        if not files:
            click.echo(f"warning: no checkpoints at {checkpoint_path()}: a cut tail cannot be detected", err=True)
        found = read_checkpoints(files)
        broken = bool(found.problems)
        for problem in found.problems:
            click.echo(f"checkpoint INVALID {problem}")
        slugs = installation_slugs()
        for installation_id, slug in slugs.items():
            report = verify_chain(installation_id, found.by_installation.get(installation_id, ()))
            broken = broken or not report.ok
            if report.ok:
                sealed = f", {report.legacy_rows} unkeyed rows sealed" if report.legacy_rows else ""
                click.echo(
                    f"{slug}: ok ({report.rows_checked} rows{sealed}; {report.checkpoints_checked} checkpoints agree)"
                )
            elif report.first_broken_seq is None:
                click.echo(f"{slug}: NOT KEYED: {report.reason}")
            else:
                click.echo(f"{slug}: BROKEN at seq {report.first_broken_seq}: {report.reason}")
        for installation_id in sorted(found.by_installation.keys() - slugs.keys()):
            broken = True
            click.echo(f"{installation_id}: MISSING: checkpoints name an installation the database does not have")
        sys.exit(1 if broken else 0)

    @app.cli.command("backup")
    @click.argument("file", type=click.Path(dir_okay=False, writable=True))
    def backup(file: str) -> None:
        """Write every table to FILE as JSON lines (gzip when it ends in .gz), read in one
        transaction (OPS-6), ending with a MAC under a key derived from AUDIT_CHAIN_KEY.
        The instance's keys are not in it: keep them beside it."""
        from pathlib import Path

        from .extensions import db
        from .services.backup import backup_key, write_backup
        from .services.uow import chain_key

        with db.engine.connect() as conn:
            counts = write_backup(conn, Path(file), backup_key(chain_key()))
        click.echo(f"backup written to {file}: {sum(counts.values())} rows in {len(counts)} tables")

    @app.cli.command("restore")
    @click.argument("file", type=click.Path(exists=True, dir_okay=False))
    def restore(file: str) -> None:
        """Load a backup into this empty database, migrated to the backup's migration (OPS-6);
        refuses a database with rows or at another migration, and a file cut short or
        altered (its MAC, under AUDIT_CHAIN_KEY, checked before any row is written)."""
        from pathlib import Path

        from .extensions import db
        from .services.backup import RestoreRefused, backup_key, restore_backup
        from .services.uow import chain_key

        try:
            with db.engine.connect() as conn:
                counts = restore_backup(conn, Path(file), backup_key(chain_key()))
        except RestoreRefused as refused:
            click.echo(f"{refused.code}: {refused}", err=True)
            sys.exit(1)
        click.echo(f"restored {sum(counts.values())} rows into {len(counts)} tables from {file}")
        click.echo("next: flask --app app verify-audit --checkpoints <your shipped checkpoints>")

    @app.cli.command("audit-checkpoint")
    def audit_checkpoint() -> None:
        """Write a signed checkpoint of every installation's audit chain head now (REC-4)."""
        from .services.audit import checkpoint_path, installation_slugs, write_checkpoints

        slugs = installation_slugs()
        for record in write_checkpoints():
            click.echo(f"{slugs[record['installation_id']]}: checkpoint at seq {record['seq']} ({record['rows']} rows)")
        click.echo(f"appended to {checkpoint_path()} and the log")

    @app.cli.command("audit-rekey")
    @click.option("--installation", "installation_slug", default=None, help="only this installation (slug)")
    def audit_rekey(installation_slug: str | None) -> None:
        """Seal audit rows written before the chain was keyed under AUDIT_CHAIN_KEY (REC-3):
        verify them, then append an audit.rechained row linking to their head."""
        from .domain.audit_chain import LEGACY, hash_scheme
        from .services.audit import RekeyRefused, chain_head, installation_slugs, rekey_chain

        slugs = installation_slugs()
        chosen = {i: s for i, s in slugs.items() if installation_slug in (None, s)}
        if not chosen:
            click.echo(f"installation_not_found: no installation {installation_slug!r}", err=True)
            sys.exit(1)
        failed = False
        for installation_id, slug in chosen.items():
            head = chain_head(installation_id)
            if installation_slug is None and (head.seq == 0 or hash_scheme(head.head_hash)[0] != LEGACY):
                click.echo(f"{slug}: keyed already ({head.seq} rows)")
                continue
            try:
                details = rekey_chain(installation_id)
            except RekeyRefused as error:
                failed = True
                click.echo(f"{slug}: REFUSED: {error}", err=True)
                continue
            click.echo(f"{slug}: {details['previous_rows']} unkeyed rows verified and sealed by audit.rechained")
        sys.exit(1 if failed else 0)

    @app.cli.command("secrets-status")
    def secrets_status_command() -> None:
        """Where the sealed platform secrets stand (OPS-3): values per key id and column,
        plain values left. Exit 1 while a value is plain or under a key not configured."""
        from .services.secrets_key import secrets_status

        status = secrets_status()
        click.echo(f"current key: {status.current} (SECRETS_KEY)")
        click.echo(f"previous keys: {', '.join(status.previous) or 'none'} (SECRETS_KEY_PREVIOUS)")
        for column in status.columns:
            counts = ", ".join(
                f"{n} {'plain' if kid == 'plain' else f'under {kid}'} ({status.describe(kid)})"
                for kid, n in sorted(column.by_key.items())
            )
            click.echo(f"{column.context}: {counts or 'none'}")
        plain, missing, previous = status.total("plain"), status.total("missing"), status.total("previous")
        click.echo(f"plain: {plain}; under a key not configured: {missing}; under a previous key: {previous}")
        if previous or plain:
            click.echo("run `flask rotate-secrets-key` to seal them under the current key")
        elif status.previous:
            click.echo("nothing is sealed under a previous key: SECRETS_KEY_PREVIOUS may be removed")
        sys.exit(1 if plain or missing else 0)

    @app.cli.command("rotate-secrets-key")
    def rotate_secrets_key_command() -> None:
        """Re-seal every platform secret under SECRETS_KEY, opening the old ones with
        SECRETS_KEY_PREVIOUS, in one transaction (OPS-3); audited as secrets.key_rotated."""
        from .services.secrets_key import RotationRefused, rotate_secrets_key

        invoked_by = _invoked_by()
        try:
            rotation = rotate_secrets_key(invoked_by)
        except RotationRefused as error:
            click.echo(f"{error.code}: {error}", err=True)
            sys.exit(1)
        resealed, plain = sum(rotation.resealed.values()), sum(rotation.sealed_plain.values())
        click.echo(f"current key: {rotation.key_id}")
        for context in sorted(rotation.resealed.keys() | rotation.sealed_plain.keys()):
            click.echo(f"  {context}: {rotation.resealed[context]} resealed, {rotation.sealed_plain[context]} plain sealed")
        click.echo(f"resealed {resealed}, sealed {plain} plain, {rotation.unchanged} under the current key already")
        if rotation.changed:
            click.echo(f"recorded as secrets.key_rotated, run by OS user {invoked_by['os_user']} on host {invoked_by['host']}")

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
    @click.option(
        "--reason",
        required=True,
        help="why no second admin can approve it (12+ visible characters, 2+ words; invisible ones do not count)",
    )
    @click.option("--digest", default=None, help="the change's digest (sha256:…), to apply only that exact change")
    def config_break_glass(change_id: str, reason: str, digest: str | None) -> None:
        """Apply a pending configuration change without a second admin (SPEC FOUR-2).

        The only way round four-eyes for configuration: it needs a reason of substance
        and writes a ``config.break_glass`` audit row naming the change, its digest,
        the reason, and the OS user and host that ran it (FOUR-10).
        """
        from .domain.errors import ApiError
        from .services.admin.reviews import break_glass

        invoked_by = _invoked_by()
        try:
            outcome = break_glass(change_id, reason, digest=digest, invoked_by=invoked_by)
        except ApiError as error:
            click.echo(f"{error.code}: {error.message}", err=True)
            sys.exit(1)
        change = outcome.change
        click.echo(f"applied {change.id} ({change.kind}: {change.summary})")
        click.echo(f"  digest {change.digest}; recorded as config.break_glass with your reason")
        click.echo(f"  run by OS user {invoked_by['os_user']} on host {invoked_by['host']}")
        for name, value in outcome.delivered.items():  # an account's invitation (FOUR-6)
            click.echo(f"  {name.replace('_', ' ')}: {value}")


def _propose_settings_file(service, name: str, path: str, installation_slug: str, proposer_email: str) -> None:
    """Propose the settings document at `path` through `service` (its `parse_document`
    and `propose_settings`); every problem printed, exit 1 on a refusal (FOUR-2)."""
    from .domain.errors import ApiError
    from .services.admin.token_changes import cli_proposer

    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(200_001)
    except (OSError, UnicodeDecodeError) as error:
        click.echo(f"{name.lower()}_settings_unreadable: {error}", err=True)
        sys.exit(1)
    try:
        pending = service.propose_settings(cli_proposer(installation_slug, proposer_email), service.parse_document(text))
    except ApiError as error:
        click.echo(f"{error.code}: {error.message}", err=True)
        for problem in getattr(error, "problems", ()):
            click.echo(f"  - {problem}", err=True)
        sys.exit(1)
    if pending is None:
        click.echo(f"Nothing to change: the {name} settings are those already.")
        return
    click.echo(f"change:   {pending.change_id} (digest {pending.digest})")
    click.echo("It applies when a second admin approves it at /admin/changes.")
